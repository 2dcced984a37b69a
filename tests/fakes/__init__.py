"""Local fakes of the hosted APIs ghbuild talks to (Docker Hub, GitHub), speaking their real wire format.

Both are backed by a real distribution registry for image data; see `dockerhub.py` and `github.py`. Also here:
`faultproxy.py` (faults between a client and a registry), `registry_server.py` (a throwaway `docker-registry`),
`httpserver.py` (the server scaffolding they share), `oci.py` (the independent registry client the tests and
benchmarks use as their oracle) and `rocm_tools.py`.
"""
