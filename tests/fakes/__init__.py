"""Local fakes of the hosted APIs ghbuild talks to (Docker Hub, GitHub), speaking their real wire format.

Both are backed by a real distribution registry for image data; see `dockerhub.py` and `github.py`.
"""
