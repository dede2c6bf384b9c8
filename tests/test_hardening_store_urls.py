"""Catalog store URLs follow SQLAlchemy's convention; reading never creates a catalog (issue 15, item 11).

``sqlite:///b.db`` used to write ``/b.db``.  Now ``sqlite:///relative.db`` is
relative to the working directory and ``sqlite:////absolute.db`` (four
slashes) is absolute; ``open_store(url, create=False)`` refuses a catalog that
does not exist instead of creating it and its directories.
"""

from __future__ import annotations

import os
import sqlite3

import pytest

from boreas.catalog.store import StoreError, absolute_store_url, default_store_url, open_store
from boreas.catalog.store.base import Change


def test_three_slashes_is_relative_to_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with open_store("sqlite:///b.db") as store:
        store.commit(0, [Change("schema", "T", "<schema name='T'/>")])
    assert (tmp_path / "b.db").is_file()
    assert not os.path.exists("/b.db") or os.path.getmtime("/b.db") < os.path.getmtime(tmp_path / "b.db")
    with open_store("sqlite:///sub/dir/c.db"):
        pass
    assert (tmp_path / "sub" / "dir" / "c.db").is_file()


def test_four_slashes_is_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    url = "sqlite:///" + str(tmp_path / "abs" / "a.db")
    assert url.startswith("sqlite:////")
    with open_store(url):
        pass
    assert (tmp_path / "abs" / "a.db").is_file()
    assert not (tmp_path / str(tmp_path).lstrip("/")).exists()


def test_default_and_absolute_urls_name_the_same_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    url = default_store_url(tmp_path)
    assert url == "sqlite:///" + str((tmp_path / "boreas-catalog.db").resolve())
    with open_store(url) as store:
        store.commit(0, [Change("schema", "T", "<schema name='T'/>")])
    with open_store("sqlite:///boreas-catalog.db", create=False) as store:
        assert store.version() == 1
    assert absolute_store_url("sqlite:///boreas-catalog.db") == "sqlite:///" + str(tmp_path / "boreas-catalog.db")


def test_reading_a_missing_catalog_creates_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreError) as info:
        open_store("sqlite:///missing/dir/x.db", create=False)
    assert "does not exist" in str(info.value) and str(tmp_path / "missing" / "dir" / "x.db") in str(info.value)
    assert list(tmp_path.iterdir()) == []


def test_reading_a_file_that_is_not_a_catalog_leaves_it_alone(tmp_path):
    other = tmp_path / "other.db"
    sqlite3.connect(other).close()
    before = other.read_bytes()
    with pytest.raises(StoreError, match="not a Boreas catalog"):
        open_store("sqlite:///" + str(other), create=False)
    assert other.read_bytes() == before


def test_a_missing_relative_catalog_hints_at_an_absolute_one(tmp_path, monkeypatch):
    old = tmp_path / "old.db"
    with open_store("sqlite:///" + str(old)):
        pass
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    legacy = "sqlite:///" + str(old).lstrip("/")  # what used to mean the absolute path
    with pytest.raises(StoreError) as info:
        open_store(legacy, create=False)
    assert f"sqlite:///{old}" in str(info.value)


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///", "sqlite://b.db"])
def test_malformed_sqlite_urls_are_refused(url):
    with pytest.raises(StoreError):
        open_store(url)
