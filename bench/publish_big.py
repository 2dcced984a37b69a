#!/usr/bin/env python3
"""Nightly publish of two per-arch images with a 4 GiB layer each, staging -> hub: ghbuild against skopeo and the
hub's ingest floor, its peak RSS, and the same publish with one upload cut at 60 %.

The machinery is bench/publish_copy.py's (its Bench, subclassed here): the same generated Docker schema2 images
written straight into the staging registry (127.0.0.1:5000), a fresh hub repository (127.0.0.1:5001) per
measurement, emptied right after it, the same tools and checks. The images here: per arch a 32 MiB base layer
and a 4 GiB "model" layer (`--layer-mib`) of random, incompressible data, stored gzip (level 0: deflate on random
data gains nothing and level 1 would take 16x longer to generate).

Rows, side by side in one run (`--repeats` rounds, the order flipping per round, then the cut):
  (b) skopeo: `skopeo copy` per arch, then the manifest list by an HTTP PUT (skopeo 1.9 cannot make one);
  (c) `ghbuild publish nightly`; its peak RSS is its own process's maxrss (wait4);
  (d) the floor: the hub's ingest alone, one `curl -T <file>` PUT per blob from the cached files, all at once;
  (g) (d) with the source serving the same bytes: the same PUTs (from the staging registry's own files) while
      `curl -o /dev/null` GETs every blob from the staging registry, all at once. A copy between two registries
      cannot take less than this on one machine: the source's serving and the target's ingest share its cores
      (ghbuild's own work is the difference between (c) and (g));
  (e) (c) with the hub behind tests/fakes/faultproxy.py, which resets the connection of the first PATCH of a
      big layer at 60 % of its bytes: bytes sent in all (the proxy's count of upload bodies) over the image
      size, and whether ghbuild resumed the blob or sent it again whole. The local registries are distribution
      2.8, which cannot report an upload's progress: expect "sent again whole" there;
  (f) the big layer alone copied by ghbuild.registry.copy (in this process) into a registry that can report it,
      tests/fakes/resumable_registry.py (distribution 3's upload protocol, storing under /tmp), cut the same way:
      expect "resumed" and next to nothing sent twice.

Goals (issue 25): (c) <= 1.1x (d) and <= 0.8x (b); peak RSS <= 150 MB; bytes re-sent <= 1.0x the cut blob (0
where resumed). Prints the table and "goal met/NOT met" lines; exits 0 after printing, 2 when the setup fails.

Disk: the layer cache takes 8.7 GB in /tmp/ghbuild-bench-publish-big (kept between runs, checked by size and
digest; `--clean` deletes it and exits). A run adds 8.7 GB to each registry's storage (staging and hub), up to
2.6 GB more of a cut upload on the hub, and 4.3 GB for (f) while it runs; at the end the bench deletes its
repositories and then, since distribution keeps blob data until a garbage collection, the data of its own
layers that no repository links any more: ~31 GB at the peak, nothing left in the registries afterwards.
Before each run the page cache holds what that run sends and not the other copy (untimed): the cached files
for the floor's curl, the staging registry's copy of the layers for every other tool, the other dropped with
POSIX_FADV_DONTNEED. Each run starts from memory with the same free memory for the hub's writes; with both
copies cached (17.3 GB on a 23 GB machine), the hub's writes evicted one of them mid-run. Memory: nothing holds
a layer. Time: ~1 min to generate the cache once, then ~5 min a run on the 2-core machine (`--repeats 1`), ~7
with `--repeats 2`.

Usage: make infra-up && .venv/bin/python bench/publish_big.py [--repeats 1] [--layer-mib 4096] [--no-cut]
       [--installed] [--verbose] | --clean
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import publish_copy as pc
from fakes.faultproxy import FaultProxy
from fakes.resumable_registry import ResumableRegistry

from ghbuild.registry.client import Registry
from ghbuild.registry.copy import CopyStats, copy_blob
from ghbuild.registry.manifest import Descriptor
from infra.registry import registry_dir

MIB = pc.MIB
CACHE_DIR = pc.CACHE_DIR.with_name("ghbuild-bench-publish-big")
BASE_MIB = 32
CUT = 0.6
TOOLS = ("skopeo", "ghbuild", "floor", "source")
LABEL = {"skopeo": "(b) skopeo copy + list PUT", "ghbuild": "(c) ghbuild publish nightly",
         "floor": "(d) floor: hub ingest alone, curl", "cut": "(e) (c), one upload cut at 60 %",
         "resume": "(f) big blob cut, resumable target", "source": "(g) (d) + staging serving (curl GET)"}
GOAL_FLOOR, GOAL_SKOPEO, GOAL_RSS, GOAL_RESENT = 1.1, 0.8, 150e6, 1.0
STATS_RE = re.compile(r"uploads cut: (\d+) resumed, (\d+) sent again whole, ([\d,]+) bytes sent in all")


class BigBench(pc.Bench):
    gzip_level = 0

    def __init__(self, args: argparse.Namespace):
        self.layer_kinds = (("base", BASE_MIB * MIB), ("model", args.layer_mib * MIB))
        self.cache_dir = CACHE_DIR / f"{args.layer_mib}mib"    # a smaller --layer-mib keeps the big ones
        super().__init__(args)
        self.cuts: dict[str, dict[str, int]] = {}   # per cut run: bytes through the proxy, the cut blob's size...

    @property
    def blob_bytes(self) -> int:
        return sum(img.blob_bytes for img in self.images.values())

    def tool_cut(self, m: pc.Measurement, sp: int, hp: int) -> None:
        """ghbuild publish with the hub behind a fault proxy that cuts the first big PATCH at CUT of its bytes."""
        big = min(img.layers[-1]["size"] for img in self.images.values())
        with FaultProxy(f"http://127.0.0.1:{hp}", upstream_timeout=600) as proxy:
            rule = proxy.reset("PATCH", r"/blobs/uploads/", after=int(big * CUT), min_content_length=big)
            self.tool_ghbuild(m, sp, int(proxy.host.rsplit(":", 1)[1]))
            entries = proxy.log
        if proxy.errors:
            raise pc.BenchError(f"fault proxy: {proxy.errors[0]}")
        if rule.fired != 1:
            raise pc.BenchError(f"the fault proxy cut {rule.fired} uploads, not 1")
        stats = STATS_RE.search(" ".join(m.notes))
        if not stats:
            raise pc.BenchError(f"ghbuild did not report the cut upload: {m.notes}")
        self.cuts[m.tool] = cut_counts(entries, big, int(stats[1]), int(stats[2]), int(stats[3].replace(",", "")),
                                       self.blob_bytes)

    def tool_resume(self, m: pc.Measurement, sp: int, hp: int) -> None:
        """The big layer alone, staging -> a registry that answers an upload's status (distribution 3's protocol,
        tests/fakes/resumable_registry.py, storing under /tmp), by ghbuild.registry.copy in this process, its
        upload cut at CUT as in tool_cut. Not the hub: distribution 2.8 cannot resume."""
        desc = max((layer for img in self.images.values() for layer in img.layers), key=lambda la: la["size"])
        blob = Descriptor(pc.MT_LAYER, desc["digest"], desc["size"])
        stats, logs = CopyStats(), []
        with tempfile.TemporaryDirectory(prefix="ghbuild-bench-resume-") as store, \
                ResumableRegistry(Path(store)) as target, FaultProxy(target.url) as proxy:
            rule = proxy.reset("PATCH", r"/blobs/uploads/", after=int(blob.size * CUT), min_content_length=blob.size)
            t0 = time.monotonic()
            copy_blob(Registry(f"127.0.0.1:{sp}", log=logs.append), self.staging_repo,
                      Registry(proxy.host, log=logs.append), "bench/resume", blob, stats)
            m.seconds = time.monotonic() - t0
            entries = proxy.log
            if target.blob(blob.digest).stat().st_size != blob.size or rule.fired != 1 or proxy.errors:
                raise pc.BenchError(f"resume: blob not stored whole, {rule.fired} cut(s), {proxy.errors[:1]}")
        m.notes += [line.strip() for line in logs if line.lstrip().startswith(("resume", "resend"))]
        self.cuts[m.tool] = cut_counts(entries, blob.size, stats.resumed_blobs, stats.resent_blobs, stats.sent_bytes,
                                       blob.size)

    def tool_source(self, m: pc.Measurement, sp: int, hp: int) -> None:
        """(g) The floor's PUTs, from the staging registry's files (the copy in the page cache), while curl GETs
        every blob from the staging registry to /dev/null."""
        blobs = [(digest, self.staged_file(digest) or path) for digest, path in self.floor_blobs(m.scenario)]
        gets = [[self.curl, "-sS", "--fail", "-o", "/dev/null",
                 f"http://127.0.0.1:{sp}/v2/{self.staging_repo}/blobs/{digest}"] for digest, _ in blobs]
        self._ingest_floor(m, hp, blobs, beside=gets)

    @staticmethod
    def staged_file(digest: str) -> Path | None:
        """The staging registry's own file of a blob (its filesystem storage), if it holds one."""
        hexa = digest.removeprefix("sha256:")
        path = registry_dir("staging") / "data/docker/registry/v2/blobs/sha256" / hexa[:2] / hexa / "data"
        return path if path.is_file() else None

    def verify(self, m: pc.Measurement) -> None:
        if m.tool not in ("resume", "source"):    # not publishes: their tool checked every blob arrived
            super().verify(m)

    def measure(self, scenario: int, tool: str, run: int, counted: bool) -> pc.Measurement:
        """publish_copy's measurement, after warming the page cache with every source file (untimed), and
        with the CPU everything else on the machine used meanwhile (`others`: other engineers' builds)."""
        self.warm(tool)
        before, own = busy_seconds(), resource.getrusage(resource.RUSAGE_SELF)
        m = super().measure(scenario, tool, run, counted)
        now = resource.getrusage(resource.RUSAGE_SELF)
        m.cpu["bench"] = now.ru_utime + now.ru_stime - own.ru_utime - own.ru_stime   # the fault proxy's, mostly
        m.cpu["others"] = busy_seconds() - before - sum(v for k, v in m.cpu.items() if k != "dockerd" and v == v)
        return m

    def warm(self, tool: str) -> None:
        """Read what `tool` sends into the page cache and drop the other copy from it: the floor's curl sends the
        cached files, every other tool the staging registry's copy of the layers. Each run then starts with its
        source in memory and the same free memory for the hub's writes (8.7 GB); with both copies cached, the
        hub's writes pushed one of them out mid-run, from under whichever tool read it."""
        buf, t0 = bytearray(4 * MIB), time.monotonic()
        for img in self.images.values():
            for layer in img.layers:
                staged, cached = self.staged_file(layer["digest"]), Path(layer["path"])
                if staged is None:
                    raise pc.BenchError(f"staging holds no file for {layer['digest'][:19]}")
                read, drop = (cached, staged) if tool == "floor" else (staged, cached)
                with open(drop, "rb", buffering=0) as f:
                    os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
                with open(read, "rb", buffering=0) as f:
                    while f.readinto(buf):
                        pass
        pc.log(f"page cache: {'the cached files' if tool == 'floor' else 'the staged layers'} read, the other "
               f"copy dropped, in {time.monotonic() - t0:.1f} s (untimed)")

    def schedule(self, index: int) -> list[tuple[str, int, bool]]:
        order: list[tuple[str, int, bool]] = []
        for r in range(self.args.repeats):
            order += [(t, r + 1, False) for t in (TOOLS if r % 2 == 0 else TOOLS[::-1])]
        return order + ([] if self.args.no_cut else [("cut", 1, False), ("resume", 1, False)])

    def cleanup(self) -> None:
        super().cleanup()
        freed = reclaim_storage({layer["digest"] for img in self.images.values() for layer in img.layers},
                                self.prefix)
        pc.log(f"cleanup: {freed / 1e9:.1f} GB deleted from the registries' storage: the data of layers no "
               f"repository links any more, and {self.prefix}/ with the upload sessions a cut left there")


def cut_counts(entries: list, cut_size: int, resumed: int, resent: int, reported: int, total: int) -> dict[str, int]:
    """What a cut run sent: the upload bodies the proxy received, where it cut, ghbuild's own counts."""
    cut = next(e for e in entries if e.action == "reset")
    return {"sent": sum(e.request_bytes for e in entries if e.method in ("PATCH", "PUT")), "cut_at": cut.request_bytes,
            "cut_size": cut.content_length or cut_size, "resumed": resumed, "resent": resent, "reported": reported,
            "total": total}


def busy_seconds() -> float:
    """CPU seconds the whole machine spent busy since boot (/proc/stat: all but idle and iowait)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def reclaim_storage(digests: set[str], prefix: str) -> int:
    """Delete the stored data of `digests` that no repository of the local registries links (what their garbage
    collection would delete; these digests are this bench's own random layers), and the bench's repositories
    (`prefix`, emptied already) with the upload sessions left in them: distribution 2.8 keeps a cut session's
    bytes (2.6 GB here) whatever the client does, until its upload purging, which the local registries have
    off. Bytes freed."""
    freed = 0
    for role in ("staging", "hub"):
        root = registry_dir(role) / "data" / "docker" / "registry" / "v2"
        ours = root / "repositories" / prefix
        freed += sum(f.stat().st_size for f in ours.rglob("*") if f.is_file()) if ours.is_dir() else 0
        shutil.rmtree(ours, ignore_errors=True)
        linked = {p.parent.name for p in (root / "repositories").glob("**/_layers/sha256/*/link")}
        for digest in digests:
            hexa = digest.removeprefix("sha256:")
            blob = root / "blobs" / "sha256" / hexa[:2] / hexa
            if hexa in linked or not blob.is_dir():
                continue
            freed += sum(f.stat().st_size for f in blob.iterdir() if f.is_file())
            shutil.rmtree(blob, ignore_errors=True)
    return freed


# --------------------------------------------------------------------------- report


def rows(bench: BigBench) -> dict[str, list[pc.Measurement]]:
    out: dict[str, list[pc.Measurement]] = {}
    for m in bench.measurements:
        if m.ok:
            out.setdefault(m.tool, []).append(m)
    return out


def report(bench: BigBench, command: str) -> None:
    total, found = bench.blob_bytes, rows(bench)
    median = {tool: statistics.median(m.seconds for m in ms) for tool, ms in found.items()}
    print(f"\npublish nightly of 2 per-arch images, {total / 1e9:.2f} GB of blobs in all ("
          + ", ".join(f"{a} {img.blob_bytes / 1e9:.2f} GB: " + " + ".join(f"{la['size'] / 1e6:,.0f}"
                                                                           for la in img.layers) + " MB layers"
                      for a, img in bench.images.items())
          + f"), staging 127.0.0.1:{pc.STAGING} -> hub 127.0.0.1:{pc.HUB}")
    print(f"command: {command}")
    print(f"wall s: median of {bench.args.repeats} run(s) each, interleaved; the cut run once\n")
    head = f"{'tool':<36} {'wall s':>7} {'range s':>12} {'MB/s':>6} {'peak RSS MB':>11} {'vs (c)':>7}"
    print(head)
    print("-" * len(head))
    for tool in (*TOOLS, "cut", "resume"):
        ms = found.get(tool)
        if not ms:
            fails = [m.error for m in bench.measurements if m.tool == tool]
            print(f"{LABEL[tool]:<36} " + (f"FAILED: {fails[0][:100]}" if fails else "not run"))
            continue
        rng = f"{min(m.seconds for m in ms):.1f}-{max(m.seconds for m in ms):.1f}" if len(ms) > 1 else ""
        rss = f"{max(m.peak_rss for m in ms) / 1e6:.0f}" if tool in ("ghbuild", "cut") else "-"
        ratio = f"{median[tool] / median['ghbuild']:.2f}x" if "ghbuild" in median and tool != "resume" else "-"
        moved = bench.cuts["resume"]["total"] if tool == "resume" else total
        print(f"{LABEL[tool]:<36} {median[tool]:7.1f} {rng:>12} {moved / median[tool] / 1e6:6.0f} {rss:>11} "
              f"{ratio:>7}")
    print()
    for m in bench.measurements:
        if m.notes or not m.ok:
            print(f"note: {m.tool} run {m.run}: " + "; ".join(m.notes) + (f"; FAILED: {m.error}" if not m.ok else ""))
    print("\nwhere the time goes (CPU seconds during each run; 2 cores; the registries are shared with anything "
          "else running):")
    for m in bench.measurements:
        if m.ok:
            cpu = ", ".join(f"{k} {v:.1f}" for k, v in m.cpu.items() if v == v)
            print(f"  {m.tool:<7} run {m.run}: {m.seconds:6.1f} s wall; cpu s: {cpu}{phases(m)}")
    print()
    for good, text in verdicts(bench, median, found):
        print(f"{'info' if good is None else 'goal met' if good else 'goal NOT met'}: {text}")
    for m in bench.measurements if bench.args.verbose else ():
        if m.timeline:
            print(f"\nghbuild's log, {m.tool} run {m.run}:\n" + "\n".join(f"  {t:6.1f}  {line[:140]}"
                                                                           for t, line in m.timeline))


def phases(m: pc.Measurement) -> str:
    """ghbuild's blob copies, then its tag phase (the publish lease's settle time, then the tag writes)."""
    copied = [t for t, line in m.timeline if line.lstrip().startswith("copy   sha256:")]
    tagged = [t for t, line in m.timeline if line.lstrip().startswith("tag ")]
    if not copied or not tagged:
        return ""
    return f"; blobs copied by {copied[-1]:.1f} s, tag phase (publish lease) {tagged[-1] - copied[-1]:.1f} s"


def verdicts(bench: BigBench, median: dict[str, float], found: dict[str, list[pc.Measurement]]
             ) -> list[tuple[bool | None, str]]:
    """(met, what) per goal; met None: a figure that explains, not a goal."""
    out: list[tuple[bool | None, str]] = []
    g = median.get("ghbuild")
    if g and "floor" in median:
        ratio = g / median["floor"]
        out.append((ratio <= GOAL_FLOOR, f"ghbuild takes {ratio:.2f}x the hub's ingest floor, "
                                         f"{g - median['floor']:+.1f} s (goal <= {GOAL_FLOOR}x)"))
    if g and "source" in median and "floor" in median:
        out.append((None, f"ghbuild takes {g / median['source']:.2f}x (g), {g - median['source']:+.1f} s: the hub's "
                          "ingest with the staging registry serving the same bytes beside it, what any copy between "
                          f"the two costs this machine; (g) itself is {median['source'] / median['floor']:.2f}x the "
                          "floor"))
    if g and "skopeo" in median:
        ratio = g / median["skopeo"]
        out.append((ratio <= GOAL_SKOPEO, f"ghbuild takes {ratio:.2f}x skopeo's time, {g - median['skopeo']:+.1f} s "
                                          f"(goal <= {GOAL_SKOPEO}x)"))
    if "ghbuild" in found and "floor" in found:
        work = {t: statistics.median(sum(m.cpu.get(k, 0.0) for k in ("tool", "staging", "hub")) for m in found[t])
                for t in ("ghbuild", "floor", "source") if t in found}
        source = (f", curl + staging + hub in (g) {work['source']:.1f} = {work['source'] / work['floor']:.2f}x"
                  if "source" in work else "")
        out.append((None, f"in CPU seconds, what the wall time follows on a saturated machine: "
                          f"ghbuild + staging + hub {work['ghbuild']:.1f}, curl + hub {work['floor']:.1f} = "
                          f"{work['ghbuild'] / work['floor']:.2f}x the floor{source}; other processes used "
                          f"{statistics.median(m.cpu['others'] for m in found['ghbuild']):.1f} and "
                          f"{statistics.median(m.cpu['others'] for m in found['floor']):.1f} CPU s during them"))
    runs = found.get("ghbuild", []) + found.get("cut", [])
    if runs:
        peak = max(m.peak_rss for m in runs)
        out.append((peak <= GOAL_RSS, f"ghbuild's peak RSS {peak / 1e6:.0f} MB over {len(runs)} publish(es) of "
                                      f"{bench.blob_bytes / 1e9:.1f} GB (goal <= {GOAL_RSS / 1e6:.0f} MB)"))
    for tool, c in bench.cuts.items():
        resent = c["sent"] - c["total"]
        # The proxy's own count: bytes still in a socket buffer at the cut never reached it, so a resumed upload
        # re-sends nothing it received.
        limit = 0 if c["resumed"] else GOAL_RESENT * c["cut_size"]
        how = (f"resumed ({c['resumed']})" if c["resumed"] else f"sent again whole ({c['resent']})")
        what = "the image" if tool == "cut" else "the blob"
        out.append((resent <= limit and (tool == "cut" or c["resumed"] == 1),
                    f"{LABEL[tool][:3]} cut at {c['cut_at'] / 1e6:,.0f} of {c['cut_size'] / 1e6:,.0f} MB, {how}: "
                    f"{c['sent'] / 1e6:,.0f} MB sent in all = {c['sent'] / c['total']:.3f}x {what} "
                    f"({c['reported'] / 1e6:,.0f} MB by ghbuild's count); re-sent {resent / 1e6:,.1f} MB = "
                    f"{resent / c['cut_size']:.3f}x the cut blob (goal <= "
                    + ("0: resumed)" if c["resumed"] else f"{GOAL_RESENT}x)")))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1, help="runs of skopeo, ghbuild and the floor (median)")
    parser.add_argument("--layer-mib", type=int, default=4096, help="payload of each image's big layer, MiB")
    parser.add_argument("--no-cut", action="store_true", help="skip (e), the publish with one upload cut")
    parser.add_argument("--installed", action="store_true", help="time ghbuild installed as the setup action "
                        "installs it in a job (not the development venv's editable install)")
    parser.add_argument("--verbose", action="store_true", help="print ghbuild's timestamped log")
    parser.add_argument("--clean", action="store_true", help=f"delete the cached layers ({CACHE_DIR}) and exit")
    args = parser.parse_args()
    if args.clean:
        size = sum(f.stat().st_size for f in CACHE_DIR.rglob("*") if f.is_file())
        shutil.rmtree(CACHE_DIR, ignore_errors=True)
        print(f"deleted {CACHE_DIR} ({size / 1e9:.1f} GB)")
        return 0
    if args.repeats < 1 or args.layer_mib < 1:
        parser.error("--repeats and --layer-mib: >= 1")
    # What publish_copy.Bench reads of its own options: scenario 1 (an empty hub), no docker reference.
    args.scenarios, args.no_floor, args.no_reference, args.reference_runs = [1], False, True, 0
    return pc.run_bench(BigBench, args, report)

if __name__ == "__main__":
    raise SystemExit(main())
