'use strict';
// pypa/gh-action-pypi-publish stand-in: fails loudly, so that an act run reaching it cannot pass for a publish.
console.log('::error::pypa/gh-action-pypi-publish stand-in: uploading to PyPI cannot be exercised under act');
process.exit(1);
