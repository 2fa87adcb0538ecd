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
