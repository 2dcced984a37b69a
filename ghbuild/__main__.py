from ghbuild.cli import main

raise SystemExit(main())
