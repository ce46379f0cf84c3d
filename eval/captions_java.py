"""The Java side of caption scoring, run offline: PTB tokenizer, METEOR 1.5 and SPICE 1.0.

The jars are the ones shipped inside pycocoevalcap, so numbers match the COCO evaluation code; only
the launching differs from pycocoevalcap's own wrappers, which (a) write temporary files into
site-packages, (b) read METEOR's answers with no check that the process is alive (a dead METEOR shows
up as "could not convert string to float: ''"), (c) download CoreNLP for SPICE on construction, and
(d) start SPICE with ``-jar`` and an LMDB/FST cache that fails on Java >= 16 unless java.base is
opened to it. Here: temporary files in a private temp folder, one METEOR process per scoring run
with a liveness check, SPICE only when its CoreNLP 3.6.0 jars are present, and ``--add-opens`` on
Java >= 9 (falling back to no cache if the cache still fails).
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from capcore.errors import CapawareError

CORENLP_JARS = ("stanford-corenlp-3.6.0.jar", "stanford-corenlp-3.6.0-models.jar")
CORENLP_ZIP = "https://nlp.stanford.edu/software/stanford-corenlp-full-2015-12-09.zip"
# java.base packages whose internals SPICE's cache (FST serialisation over lmdbjni) reflects into.
ADD_OPENS = ("java.base/java.lang", "java.base/java.lang.reflect", "java.base/java.util",
             "java.base/java.util.concurrent", "java.base/java.util.concurrent.atomic", "java.base/java.io",
             "java.base/java.math", "java.base/java.net", "java.base/java.nio", "java.base/java.text",
             "java.base/sun.nio.ch")
PTB_PUNCTUATION = {"''", "'", "``", "`", "-LRB-", "-RRB-", "-LCB-", "-RCB-", ".", "?", "!", ",", ":", "-", "--",
                   "...", ";"}
JAVA_FIX = ("install Java 8 or later: sudo apt-get install -y openjdk-17-jre-headless (Debian, Ubuntu) or "
            "brew install openjdk@17 (macOS); then `java -version` must work")


def pycocoevalcap_dir() -> Path:
    spec = importlib.util.find_spec("pycocoevalcap")
    if spec is None or not spec.submodule_search_locations:
        raise CapawareError("pycocoevalcap", "package not installed", "pip install pycocoevalcap")
    return Path(list(spec.submodule_search_locations)[0])


@dataclass
class JavaInfo:
    path: str
    version: str  # e.g. "17.0.15"
    major: int


def java_info() -> JavaInfo | None:
    """The java on PATH and its version, or None."""
    java = shutil.which("java")
    if java is None:
        return None
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r'version "([^"]+)"', out.stderr + out.stdout)
    if not m:
        return None
    version = m.group(1)
    parts = version.split(".")
    major = int(parts[1]) if parts[0] == "1" and len(parts) > 1 else int(re.match(r"\d+", parts[0]).group())
    return JavaInfo(java, version, major)


def require_java() -> JavaInfo:
    info = java_info()
    if info is None:
        raise CapawareError("java", "no Java runtime found on PATH (PTB tokenizer, METEOR and SPICE are Java)",
                            JAVA_FIX)
    return info


def _clean(text: str) -> str:
    return " ".join(text.replace("|||", " ").split())


def ptb_tokenize(sentences: list[str]) -> list[str]:
    """Stanford PTBTokenizer (CoreNLP 3.4.1, as in coco-caption): lower-case, punctuation removed."""
    java = require_java()
    jar = pycocoevalcap_dir() / "tokenizer" / "stanford-corenlp-3.4.1.jar"
    if not jar.is_file():
        raise CapawareError(jar, "PTB tokenizer jar missing from pycocoevalcap",
                            "pip install --force-reinstall pycocoevalcap")
    with tempfile.TemporaryDirectory(prefix="capaware_ptb_") as tmp:
        src = Path(tmp) / "sentences.txt"
        src.write_text("".join(_clean(s) + "\n" for s in sentences), encoding="utf-8")
        proc = subprocess.run([java.path, "-Dfile.encoding=UTF-8", "-cp", str(jar),
                               "edu.stanford.nlp.process.PTBTokenizer", "-preserveLines", "-lowerCase", str(src)],
                              capture_output=True)
    if proc.returncode != 0:
        raise CapawareError(jar, f"PTB tokenizer failed: {proc.stderr.decode(errors='replace').strip()[-300:]}",
                            "run python -m capaware.doctor")
    lines = proc.stdout.decode("utf-8", errors="replace").splitlines()
    missing = len(sentences) - len(lines)
    if missing > 0 and all(not _clean(s) for s in sentences[len(lines):]):
        lines += [""] * missing  # trailing empty captions give no output line
    if len(lines) != len(sentences):
        raise CapawareError(jar, f"PTB tokenizer returned {len(lines)} lines for {len(sentences)} captions",
                            "check the captions for control characters")
    return [" ".join(w for w in line.split() if w not in PTB_PUNCTUATION) for line in lines]


class MeteorError(RuntimeError):
    pass


class Meteor:
    """One METEOR 1.5 process for a whole scoring run (its paraphrase table takes seconds to load)."""

    def __init__(self, memory: str = "2G"):
        java = require_java()
        self.dir = pycocoevalcap_dir() / "meteor"
        jar = self.dir / "meteor-1.5.jar"
        if not jar.is_file() or not (self.dir / "data" / "paraphrase-en.gz").is_file():
            raise MeteorError(f"{jar} or its data/paraphrase-en.gz is missing "
                              "(pip install --force-reinstall pycocoevalcap)")
        self.proc = subprocess.Popen([java.path, f"-Xmx{memory}", "-Dfile.encoding=UTF-8", "-jar", jar.name, "-", "-",
                                      "-stdio", "-l", "en", "-norm"], cwd=self.dir, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self._stderr: deque[str] = deque(maxlen=20)
        threading.Thread(target=self._drain, daemon=True).start()  # a full stderr pipe would block METEOR

    def _drain(self) -> None:
        for line in self.proc.stderr:
            self._stderr.append(line.decode(errors="replace").rstrip())

    def _ask(self, line: str) -> None:
        try:
            self.proc.stdin.write((line + "\n").encode("utf-8"))
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise MeteorError(self._died()) from None

    def _answer(self) -> str:
        out = self.proc.stdout.readline().decode("utf-8", errors="replace").strip()
        if not out:
            raise MeteorError(self._died())
        return out

    def _died(self) -> str:
        self.proc.poll()
        tail = " | ".join(list(self._stderr)[-3:])
        return f"METEOR process stopped (exit {self.proc.returncode}): {tail or 'no message'}"

    def score(self, hyps: list[str], refs: list[list[str]]) -> tuple[float, list[float]]:
        """Corpus METEOR and one score per hypothesis (METEOR's own aggregation, as coco-caption)."""
        stats = []
        for hyp, rs in zip(hyps, refs):
            self._ask(" ||| ".join(["SCORE", *(_clean(r) for r in rs), _clean(hyp)]))
            stats.append(self._answer())
        self._ask(" ||| ".join(["EVAL", *stats]))
        try:
            per = [float(self._answer()) for _ in hyps]
            total = float(self._answer())
        except ValueError as err:
            raise MeteorError(f"unexpected METEOR answer ({err})") from None
        return total, per

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.kill()
            self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def corenlp_dir(override: str | Path | None = None) -> Path:
    """Where SPICE's CoreNLP 3.6.0 jars are looked for: argument, $CAPAWARE_CORENLP_DIR, pycocoevalcap's spice/lib."""
    if override:
        return Path(override)
    if os.environ.get("CAPAWARE_CORENLP_DIR"):
        return Path(os.environ["CAPAWARE_CORENLP_DIR"])
    return pycocoevalcap_dir() / "spice" / "lib"


def spice_install_hint(where: Path) -> str:
    return (f"download {CORENLP_ZIP} on a machine with internet and copy {CORENLP_JARS[0]} and {CORENLP_JARS[1]} "
            f"from it into {where} (or into any folder named by $CAPAWARE_CORENLP_DIR / --corenlp-dir)")


def spice_unavailable(override: str | Path | None = None) -> str | None:
    """None when SPICE can run; else one line: why not, and how to install what is missing."""
    if java_info() is None:
        return f"no Java runtime; {JAVA_FIX}"
    if not (pycocoevalcap_dir() / "spice" / "spice-1.0.jar").is_file():
        return "pycocoevalcap's spice/spice-1.0.jar is missing; pip install --force-reinstall pycocoevalcap"
    where = corenlp_dir(override)
    missing = [j for j in CORENLP_JARS if not (where / j).is_file()]
    if missing:
        return f"Stanford CoreNLP 3.6.0 models not found ({', '.join(missing)} absent from {where}); " \
               + spice_install_hint(where)
    return None


def spice_command(in_file: Path, out_file: Path, cache: Path | None, corenlp: Path, memory: str = "8G") -> list[str]:
    java = require_java()
    spice = pycocoevalcap_dir() / "spice"
    jars = [spice / "spice-1.0.jar", *sorted((spice / "lib").glob("*.jar")),
            *(corenlp / j for j in CORENLP_JARS)]
    opens = [f"--add-opens={p}=ALL-UNNAMED" for p in ADD_OPENS] if java.major >= 9 else []
    cmd = [java.path, f"-Xmx{memory}", *opens, "-cp", os.pathsep.join(str(j) for j in dict.fromkeys(jars)),
           "edu.anu.spice.SpiceScorer", str(in_file), "-out", str(out_file), "-subset", "-silent"]
    if cache is not None:
        cmd += ["-cache", str(cache)]
    return cmd


def spice_score(ids: list[int], hyps: list[str], refs: list[list[str]], corenlp: Path, cache: Path | None,
                memory: str = "8G") -> tuple[float, list[float], str]:
    """SPICE F-score, per image, and a note; retries once without the cache if the cached run fails."""
    note = ""
    with tempfile.TemporaryDirectory(prefix="capaware_spice_") as tmp:
        in_file, out_file = Path(tmp) / "in.json", Path(tmp) / "out.json"
        in_file.write_text(json.dumps([{"image_id": i, "test": h, "refs": r} for i, h, r in zip(ids, hyps, refs)]))
        proc = subprocess.run(spice_command(in_file, out_file, cache, corenlp, memory), capture_output=True, text=True)
        if proc.returncode != 0 and cache is not None:
            note = "SPICE cache failed on this Java; ran without it"
            proc = subprocess.run(spice_command(in_file, out_file, None, corenlp, memory), capture_output=True,
                                  text=True)
        if proc.returncode != 0:
            raise CapawareError("SPICE", f"java exited {proc.returncode}: {proc.stderr.strip()[-400:]}",
                                "run python -m capaware.doctor; pass --no-spice to score without it")
        results = {int(r["image_id"]): r["scores"]["All"]["f"] for r in json.loads(out_file.read_text())}
    # SPICE gives no F-score (0/0) for a caption without words; such a caption scores 0, as elsewhere.
    per = [0.0 if not hyp.strip() else float(results[i]) if results.get(i) is not None else float("nan")
           for i, hyp in zip(ids, hyps)]
    valid = [p for p in per if p == p]
    return (sum(valid) / len(valid) if valid else float("nan")), per, note
