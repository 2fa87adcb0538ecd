"""The generated CLI reference and the README stay in step with the code."""

import importlib.util
import re

from conftest import REPO


def _load_generator():
    spec = importlib.util.spec_from_file_location("gen_cli_reference", REPO / "docs" / "gen_cli_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_reference_is_up_to_date():
    rendered = _load_generator().render()
    committed = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    assert committed == rendered, "docs/cli.md is stale: run python docs/gen_cli_reference.py docs/cli.md --force"


def test_readme_links_resolve():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#]+)\)", readme)
    assert links, "the README links its docs pages"
    missing = [link for link in links if not (REPO / link).exists()]
    assert not missing


def test_readme_quick_start_matches_ci():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)\n```", readme, flags=re.S)
    test_command = next(block for block in blocks if "pytest" in block)
    assert test_command.strip() in (REPO / ".ci" / "run").read_text(encoding="utf-8")
    # The first two commands CI runs are the quick start's two, word for word and in its order.
    demo_command = next(block for block in blocks if "spare-opt demo" in block)
    commands = [line for line in (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
                if line.strip() and not line.startswith(("#", "set ", "cd "))]
    assert commands[:2] == [demo_command.strip(), test_command.strip()]


# --- Docs that stand alone -------------------------------------------------------------

#: Names of files that exist only outside the repository.
_OUTSIDE = re.compile(r"\.\./shared|\bshared/(?:data|docs)\b|beyond-the-paper|spare-model\.md|/work/")
#: ``issue 8``, ``issues 3 and 9``, ``Issue #12``, ``PR 4``, a bare ``#12``.
_ISSUE = re.compile(r"(?i)\b(?:issues?|PRs?|pull requests?)\s*#?\d+|(?<![\w/&#])#\d+\b")
#: ``owner/repo#123``: a public upstream issue, always fine.
_UPSTREAM_REF = re.compile(r"[\w.-]+/[\w.-]+#\d+")
#: An issue number is an upstream one when the project it belongs to is named just before it.
_UPSTREAM_NAMES = ("torchft", "pytorch", "torch", "dask", "distributed", "numba", "ortools", "or-tools", "scipy",
                   "numpy", "click", "networkx", "hypothesis", "infinitehbd")


def references_outside(text):
    """Every mention in ``text`` of a file outside the repository or of one of our issue numbers.

    Returns ``(line number, matched text)`` pairs; public upstream issues (``dask/distributed#7698``,
    ``torchft issue #186``) are not reported.
    """
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        found += [(number, match.group()) for match in _OUTSIDE.finditer(line)]
        clean = _UPSTREAM_REF.sub("", line)
        for match in _ISSUE.finditer(clean):
            before = clean[max(0, match.start() - 40):match.start()].lower()
            if not any(name in before for name in _UPSTREAM_NAMES):
                found.append((number, match.group()))
    return found


def _docstrings(path):
    """The module, class and function docstrings of one Python file, with their line numbers."""
    import ast

    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = [tree] + [node for node in ast.walk(tree)
                      if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    for node in nodes:
        doc = ast.get_docstring(node, clean=False)
        if doc:
            yield (node.body[0].lineno if node.body else 1), doc


def _documents():
    """``(name, text)`` of every document a user reads: README, docs/, instances/, docstrings, ``--help``."""
    for path in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md")), *sorted((REPO / "instances").rglob("*.md")),
                 *sorted((REPO / "docs").rglob("*.py")), *sorted((REPO / "instances").rglob("*.py"))]:
        yield str(path.relative_to(REPO)), path.read_text(encoding="utf-8")
    for package in ("spare_opt", "cli"):
        for path in sorted((REPO / package).rglob("*.py")):
            for line, doc in _docstrings(path):
                yield f"{path.relative_to(REPO)} (docstring at line {line})", doc
    yield "spare-opt --help (every command)", _load_generator().render()


def test_docs_name_nothing_outside_the_repository():
    offences = [f"{name}:{line}: {text!r}" for name, doc in _documents() for line, text in references_outside(doc)]
    assert not offences, "documents that point outside the repository:\n" + "\n".join(offences)


def test_the_outside_reference_check_catches_what_it_should():
    bad = ["see ../shared/docs/beyond-the-paper.md, section 2", "the trace in shared/data/x.json",
           "as spare-model.md says", "run /work/main/x", "targets of issue 11", "(Issue 12 found it)",
           "figures of issues 3", "fixed in #12", "see PR 4"]
    good = ["cover the handshake, dask/distributed#7698", "torchft issues #186, #192", "anchor (#checks)",
            "a colour #1f77b4", "the shared base", "## 2. Repairs", "C-style issue-free text"]
    assert [text for text in bad if not references_outside(text)] == []
    assert [text for text in good if references_outside(text)] == []


# --- Commands that stay within the user's own job ---------------------------------------------

#: Commands that signal processes by name or pattern, or every process the user owns: on a shared node they reach
#: other people's jobs (``pkill -9 -o -f -- "-u examples/launch/train.py"`` killed the oldest such process on the
#: whole machine).  A process is stopped by the pid it printed or that its launcher gave (``kill $STORE_PID``,
#: ``kill $(jobs -p)``).
_BEYOND_THE_JOB = re.compile(r"\b(?:pkill|killall|pgrep\b[^\n|]*\|\s*xargs\s+kill|kill\s+(?:-\S+\s+)*-1\b|"
                             r"fuser\s+-k)")


def commands_beyond_the_job(text):
    """``(line number, command)`` of every command in ``text`` that may stop processes outside the user's job."""
    return [(number, line.strip()) for number, line in enumerate(text.splitlines(), 1)
            if _BEYOND_THE_JOB.search(line)]


def test_no_documented_command_reaches_beyond_the_users_own_job():
    files = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "examples").rglob("*.py")),
             *sorted((REPO / "benchmarks").glob("*.py")), REPO / ".ci" / "run"]
    offences = [f"{path.relative_to(REPO)}:{line}: {command}" for path in files
                for line, command in commands_beyond_the_job(path.read_text(encoding="utf-8"))]
    assert not offences, "commands that may stop other users' processes:\n" + "\n".join(offences)


def test_the_beyond_the_job_check_catches_what_it_should():
    bad = ['sleep 15; pkill -9 -o -f -- "-u examples/launch/train.py"', "killall python", "pkill -f train.py",
           "pgrep -f worker | xargs kill -9", "kill -9 -1", "kill -- -1", "fuser -k 29600/tcp"]
    good = ["kill $STORE_PID", 'kill -9 "$(sed -n \'s/^group 1: worker pid //p\' log | tail -n 1)"',
            "wait $(jobs -p | grep -v $STORE_PID)", "os.kill(pid, signal.SIGKILL)", "kill %1", "kill -9 12345"]
    assert [text for text in bad if not commands_beyond_the_job(text)] == []
    assert [text for text in good if commands_beyond_the_job(text)] == []


def test_data_prints_the_shipped_trace_from_any_directory(tmp_path, monkeypatch):
    import json
    from pathlib import Path

    from click.testing import CliRunner
    from spare_opt import packaged_trace_path, read_fault_trace
    from spare_opt_cli.main import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SPARE_TRACE", str(tmp_path / "elsewhere.json"))   # data names the shipped trace, always
    runner = CliRunner()
    text = runner.invoke(main, ["data"])
    assert text.exit_code == 0, text.output
    path = Path(text.output.strip())
    assert path.is_absolute() and path.is_file() and path == packaged_trace_path()
    as_json = runner.invoke(main, ["data", "--json"])
    assert as_json.exit_code == 0, as_json.output
    document = json.loads(as_json.output)
    assert Path(document["trace"]) == path
    assert Path(document["license"]).is_file() and Path(document["source"]).is_file()
    trace = read_fault_trace(path)                       # the size it states is the file's
    assert len(trace.node_ids) == document["failing_nodes"] and int(trace.is_start.sum()) == document["faults"]
    assert runner.invoke(main, ["data", "extra"]).exit_code != 0


def test_readme_examples_do_not_depend_on_the_working_directory():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "T=$(spare-opt data)" in readme
    assert not re.search(r"^T=spare_opt/", readme, flags=re.M), "the trace path must work outside a clone"


def test_shell_completion_is_documented_and_works():
    import os
    import subprocess
    import sys
    from pathlib import Path

    documented = (REPO / "README.md").read_text(encoding="utf-8") + (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    assert "_SPARE_OPT_COMPLETE=bash_source spare-opt" in documented
    assert "_SPARE_OPT_COMPLETE=zsh_source spare-opt" in documented
    executable = Path(sys.executable).with_name("spare-opt")
    script = subprocess.run([str(executable)], env={**os.environ, "_SPARE_OPT_COMPLETE": "bash_source"},
                            capture_output=True, text=True, timeout=60)
    assert script.returncode == 0 and "_spare_opt_completion" in script.stdout
    words = subprocess.run([str(executable)], capture_output=True, text=True, timeout=60,
                           env={**os.environ, "_SPARE_OPT_COMPLETE": "bash_complete", "COMP_WORDS": "spare-opt da",
                                "COMP_CWORD": "1"})
    # click's bash protocol: one ``type,value`` line per candidate
    assert "data" in [line.partition(",")[2] for line in words.stdout.splitlines()]
