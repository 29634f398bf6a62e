#!/usr/bin/env python3
"""The bindings bench: the per-call cost of push and pull from Python, Java and Perl against
the same calls made from C, in the same run.

    cmake --build build -j2 --target bench_bindings_c kvbench_calls kvstore_jar kvstore_perl
    /usr/bin/python3 bench/bindings/run.py --build build            # about 2 minutes
    /usr/bin/python3 bench/bindings/run.py --build build --langs python --rounds 9

Cells (every process: a "local" store, key 0 and keys 1..100 of 4 float32 each):
    push1, pull1       push / pull of one int key with one array: ns per call
    push100, pull100   one push / pull call of keys 1..100 with 100 arrays: ns per key

Each round runs, in an order rotated from round to round, one process per language:
bench_bindings_c (C), bench_python.py (which also times the same calls made from C in its own
process through libkvbench_calls.so, and through the binding's declared ctypes prototypes),
BindingsBench.java and bench_perl.pl. Each process reports the median of its repetitions;
a language's ratio is its figure over C's figure of the same round (Python's also over the C
calls in its own process), and the table shows the medians over the rounds of both.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CELLS = ("push1", "pull1", "push100", "pull100")


def commands(build, langs, reps, seconds, java_classes, before, java_before):
    """{lang: (argv, environment)} and the jar. With before (a checkout), python-before and
    perl-before run that checkout's pure-Python / pure-Perl layer over the same build; with
    java_before (a directory of org/kvstore/*.class compiled from an older checkout),
    java-before runs with those classes ahead of the jar's."""
    build = os.path.abspath(build)
    lib = os.path.join(build, "libkvstore.so.0")
    timing = ["--reps", str(reps), "--seconds", str(seconds)]

    def env(src):
        return dict(os.environ, KVSTORE_LIBRARY=lib,
                    PYTHONPATH=os.path.join(src, "bindings", "python"),
                    PERL5LIB=os.pathsep.join([os.path.join(src, "bindings", "perl", "lib"),
                                              os.path.join(build, "bindings", "perl", "lib")]))
    jar = os.path.join(build, "bindings", "swig", "java", "kvstore.jar")
    argv = {
        "c": [os.path.join(build, "bench", "bindings", "bench_bindings_c")] + timing,
        "python": ["/usr/bin/python3", os.path.join(HERE, "bench_python.py"), "--calls-lib",
                   os.path.join(build, "bench", "bindings", "libkvbench_calls.so")] + timing,
        "java": ["java", "-Djava.library.path=" + build, "-cp",
                 jar + os.pathsep + java_classes, "BindingsBench"] + timing,
        "perl": ["perl", os.path.join(HERE, "bench_perl.pl")] + timing,
    }
    out = {lang: (argv[lang], env(ROOT)) for lang in langs}
    if before:
        for lang in ("python", "perl"):
            if lang in langs:
                out[lang + "-before"] = (argv[lang], env(os.path.abspath(before)))
    if java_before and "java" in langs:
        jb = list(argv["java"])
        jb[jb.index("-cp") + 1] = os.path.abspath(java_before) + os.pathsep + jb[jb.index("-cp") + 1]
        out["java-before"] = (jb, env(ROOT))
    return out, jar


def median(xs):
    return statistics.median(xs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="the build directory")
    ap.add_argument("--langs", default="python,java,perl",
                    help="bindings to measure (C always runs): python,java,perl")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=5, help="repetitions per process and cell")
    ap.add_argument("--seconds", type=float, default=0.1, help="seconds of calls per repetition")
    ap.add_argument("--json", help="also write the raw figures of every round to this file")
    ap.add_argument("--before", metavar="CHECKOUT",
                    help="also run the Python and Perl layers of this checkout (e.g. a "
                         "`git worktree add` of an older commit) over the same build, in the "
                         "same rounds, and print new / before")
    ap.add_argument("--java-before", metavar="CLASSES",
                    help="also run Java with these classes ahead of the jar (org/kvstore/*.class "
                         "compiled from an older checkout's bindings/java/src, e.g. "
                         "javac -cp build/bindings/swig/java/kvstore.jar -d CLASSES "
                         "OLD/bindings/java/src/org/kvstore/KVStore.java)")
    args = ap.parse_args()
    langs = ["c"] + [x for x in args.langs.split(",") if x and x != "c"]

    with tempfile.TemporaryDirectory() as classes:
        cmds, jar = commands(args.build, langs, args.reps, args.seconds, classes, args.before,
                             args.java_before)
        langs = list(cmds)
        if "java" in cmds:
            subprocess.run(["javac", "-d", classes, "-cp", jar,
                            os.path.join(HERE, "BindingsBench.java")], check=True)
        rounds = []
        for r in range(args.rounds):
            order = langs[r % len(langs):] + langs[:r % len(langs)]
            got = {}
            for lang in order:
                res = subprocess.run(cmds[lang][0], env=cmds[lang][1], stdout=subprocess.PIPE,
                                     text=True, check=True)
                got[lang] = {k: (median(v) if isinstance(v, list) else v)
                             for k, v in json.loads(res.stdout.strip().splitlines()[-1]).items()}
            rounds.append(got)
            print("round %d/%d done (%s)" % (r + 1, args.rounds, " ".join(order)),
                  file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rounds, f, indent=1)

    def col(lang, key):
        return median([rd[lang][key] for rd in rounds])

    def ratio(lang, key, base_lang, base_key):
        return median([rd[lang][key] / rd[base_lang][base_key] for rd in rounds])

    print("bindings bench: %d rounds x %d reps x %.2f s; ns per call (push1, pull1) or per key "
          "(push100, pull100), medians; (x C) = the median over rounds of figure / C's figure "
          "of the same round" % (args.rounds, args.reps, args.seconds))
    head = ["cell", "C"]
    if "python" in langs:
        head += ["Python", "(x C)", "C in-proc", "Py/C in-proc", "ctypes decl.", "(x C in-proc)"]
    for lang in ("java", "perl"):
        if lang in langs:
            head += [lang.capitalize(), "(x C)"]
    rows = []
    for cell in CELLS:
        row = [cell, "%.0f" % col("c", cell)]
        if "python" in langs:
            row += ["%.0f" % col("python", cell), "%.2f" % ratio("python", cell, "c", cell),
                    "%.0f" % col("python", "c_" + cell),
                    "%.2f" % ratio("python", cell, "python", "c_" + cell),
                    "%.0f" % col("python", "ctypes_" + cell),
                    "%.2f" % ratio("python", "ctypes_" + cell, "python", "c_" + cell)]
        for lang in ("java", "perl"):
            if lang in langs:
                row += ["%.0f" % col(lang, cell), "%.2f" % ratio(lang, cell, "c", cell)]
        rows.append(row)
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
    for r in [head] + rows:
        print("  ".join(x.rjust(w) for x, w in zip(r, widths)))
    if args.before or args.java_before:
        print("against the layers of %s, same rounds (median over rounds of before / new: "
              "> 1 is faster now):" % " and ".join(x for x in (args.before, args.java_before) if x))
        for lang in ("python", "java", "perl"):
            if lang + "-before" in langs:
                print("  %-7s %s" % (lang, "  ".join(
                    "%s %.0f -> %.0f ns (%.2fx C -> %.2fx C, %.2fx faster)" % (
                        cell, col(lang + "-before", cell), col(lang, cell),
                        ratio(lang + "-before", cell, "c", cell), ratio(lang, cell, "c", cell),
                        ratio(lang + "-before", cell, lang, cell)) for cell in CELLS)))
    if "python" in langs:
        print("a ctypes call of KVGetVersion (no arguments), in the Python process: %.0f ns"
              % col("python", "noop"))


if __name__ == "__main__":
    main()
