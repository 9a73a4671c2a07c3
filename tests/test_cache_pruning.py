"""The per-user cache stays under a bound per kind: least recently used entries go first."""

from __future__ import annotations

import os
import time

import pytest

from gpucluster import diskcache

KIND = "yaml-strict"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv(diskcache.CACHE_DIR_ENV, str(folder))
    return folder / KIND


def age(path, hours: float) -> None:
    when = time.time() - hours * 3600
    os.utime(path, (when, when))


def fill(kind_folder, n: int, size: int = 1000) -> list[str]:
    """``n`` entries of ``size`` bytes, entry i last used ``n - i`` hours ago (e0 the oldest)."""
    keys = [f"e{i}" for i in range(n)]
    for i, key in enumerate(keys):
        assert diskcache.put(KIND, key, bytes([i]) * size)
        age(kind_folder / key, n - i)
    return keys


def present(kind_folder) -> set[str]:
    return {p.name for p in kind_folder.iterdir() if not p.name.startswith(".")}


def test_a_kind_over_its_bound_loses_its_least_recently_used_entries(cache):
    keys = fill(cache, 10)
    assert diskcache.get(KIND, "e0") == bytes([0]) * 1000  # used now: no longer the oldest
    entry = (cache / "e0").stat().st_size
    removed = diskcache.prune(KIND, limit=5 * entry)
    # 10 entries > 5: remove the oldest until at most 0.8 * 5 = 4 remain; e0 was used last
    assert present(cache) == {"e0", "e7", "e8", "e9"} and removed == 6
    assert diskcache.prune(KIND, limit=5 * entry) == 0  # under the bound: nothing more
    assert all(diskcache.get(KIND, k) is None for k in keys[1:7])  # a removed entry is a miss


def test_a_write_prunes_at_most_once_an_hour(cache, monkeypatch):
    entry_size = 1000
    monkeypatch.setitem(diskcache.LIMITS, KIND, 3 * (entry_size + 200))
    fill(cache, 2)  # the first write made the marker (nothing to prune yet)
    marker = cache.parent / ".pruned" / KIND
    assert marker.is_file()
    fill(cache, 8)  # within the hour: no look at the size, the kind grows past its bound
    assert len(present(cache)) == 8
    age(marker, 2)
    assert diskcache.put(KIND, "new", b"x" * entry_size)  # the hour is over: this write prunes
    assert present(cache) == {"e7", "new"}  # at most 0.8 * 3 entries' bytes kept, newest first
    assert time.time() - marker.stat().st_mtime < 60


def test_a_hit_refreshes_only_an_entry_older_than_an_hour(cache):
    diskcache.put(KIND, "k", b"payload")
    age(cache / "k", 0.5)
    before = (cache / "k").stat().st_mtime
    assert diskcache.get(KIND, "k") == b"payload"
    assert (cache / "k").stat().st_mtime == before  # a recent entry: no write on a hit
    age(cache / "k", 2)
    assert diskcache.get(KIND, "k") == b"payload"
    assert time.time() - (cache / "k").stat().st_mtime < 60


def test_only_this_users_regular_entries_and_stale_temporary_files_are_removed(cache, tmp_path):
    fill(cache, 3)
    outside = tmp_path / "outside"
    outside.write_bytes(b"x" * 5000)
    (cache / "link").symlink_to(outside)
    shared = cache / "shared"
    shared.write_bytes(b"x" * 5000)
    shared.chmod(0o666)  # writable by others: not an entry of this cache
    age(shared, 100)
    stale, fresh = cache / ".e9.123.abcd.tmp", cache / ".e8.456.ef01.tmp"
    stale.write_bytes(b"x")
    fresh.write_bytes(b"x")
    age(stale, 2)
    diskcache.prune(KIND, limit=1)
    assert present(cache) == {"link", "shared"}  # every entry went; the foreign files stayed
    assert outside.read_bytes() == b"x" * 5000
    assert not stale.exists() and fresh.exists()
