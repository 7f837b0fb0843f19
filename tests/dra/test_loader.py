"""Reading objects from YAML, JSON, multi-document streams and Lists, with labelled errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from audit.dra.loader import LoadError, _yaml_documents, load_documents, load_text, yaml_problem

CLAIM = "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: %s}\n"


def names(docs: list[tuple[str, dict]]) -> list[tuple[str, str]]:
    return [(label, raw["metadata"]["name"]) for label, raw in docs]


@pytest.mark.parametrize(("text", "expected"), [
    pytest.param(CLAIM % "a", [("f.yaml#1", "a")], id="single-document"),
    pytest.param(CLAIM % "a" + "---\n" + CLAIM % "b", [("f.yaml#1", "a"), ("f.yaml#2", "b")], id="multi-document"),
    pytest.param(CLAIM % "a" + "---\n---\n" + CLAIM % "b", [("f.yaml#1", "a"), ("f.yaml#3", "b")], id="empty-documents-skipped"),
    pytest.param(CLAIM % "a" + "---\n" + CLAIM % "a", [("f.yaml#1", "a"), ("f.yaml#2", "a")], id="equal-names-not-merged"),
    pytest.param("kind: List\nitems:\n- kind: ResourceClaim\n  metadata: {name: a}\n- kind: ResourceClaim\n  metadata: {name: b}\n",
                 [("f.yaml#1.items[0]", "a"), ("f.yaml#1.items[1]", "b")], id="kind-list-flattened"),
    pytest.param('{"kind": "ResourceClaimList", "items": [{"kind": "ResourceClaim", "metadata": {"name": "a"}}]}',
                 [("f.yaml#1.items[0]", "a")], id="json-typed-list"),
    pytest.param('[{"kind": "ResourceClaim", "metadata": {"name": "a"}}, {"kind": "ResourceClaim", "metadata": {"name": "b"}}]',
                 [("f.yaml[0]", "a"), ("f.yaml[1]", "b")], id="json-array"),
])
def test_load_text(text: str, expected: list[tuple[str, str]]) -> None:
    assert names(load_text(text, "f.yaml")) == expected


@pytest.mark.parametrize(("text", "message"), [
    pytest.param("kind: X\n  bad: [\n", "f.yaml: invalid YAML:", id="bad-yaml"),
    pytest.param("- 1\n- 2\n", "f.yaml#1: expected a Kubernetes object (a mapping), got list", id="top-level-list"),
    pytest.param("just a string\n", "f.yaml#1: expected a Kubernetes object (a mapping), got str", id="scalar"),
    pytest.param("kind: List\nitems: 5\n", "f.yaml#1: items: expected a list, got int", id="list-items-not-a-list"),
    pytest.param("kind: List\nitems: [3]\n", "f.yaml#1.items[0]: expected a Kubernetes object", id="list-item-not-an-object"),
    pytest.param('{"kind": ', "f.yaml: invalid", id="bad-json"),
])
def test_load_errors_name_file_and_document(text: str, message: str) -> None:
    with pytest.raises(LoadError) as err:
        load_text(text, "f.yaml")
    assert str(err.value).startswith(message)


def test_load_documents_labels_with_the_file_name(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(CLAIM % "a")
    assert names(load_documents(str(path))) == [("cluster.yaml#1", "a")]


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(LoadError, match="cannot read file"):
        load_documents(str(tmp_path / "nope.yaml"))



FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
YAML_FIXTURES = sorted(p for p in FIXTURES.rglob("*.yaml") if p.name != "broken.yaml")


@pytest.mark.parametrize("path", YAML_FIXTURES, ids=[str(p.relative_to(FIXTURES)) for p in YAML_FIXTURES])
def test_fast_yaml_parser_reads_what_the_pure_python_one_reads(path: Path) -> None:
    text = path.read_text()
    assert _yaml_documents(text) == list(yaml.safe_load_all(text))


def test_yaml_the_fast_parser_refuses_gets_the_pure_python_message() -> None:
    with pytest.raises(LoadError) as caught:
        load_text("kind: X\nspec: {a: 1\n  b: [\n", "f.yaml")
    with pytest.raises(yaml.YAMLError) as pure:
        list(yaml.safe_load_all("kind: X\nspec: {a: 1\n  b: [\n"))
    assert str(caught.value) == f"f.yaml: invalid YAML: {yaml_problem(pure.value)}"


@pytest.mark.parametrize("argv", [
    pytest.param(["validate", "-f", "@"], id="validate"),
    pytest.param(["policy", "check", "@"], id="policy-check"),
    pytest.param(["simulate", "--quiet", "--scenario", "@"], id="simulate-scenario"),
    pytest.param(["simulate", "--quiet", "--policy", "@"], id="simulate-policy"),
    pytest.param(["why", "--dump", "@", "a/b", "--model", "H100"], id="why-dump"),
])
def test_every_command_reports_malformed_yaml_in_one_line_naming_the_file_once(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    from audit.cli.main import main

    f = tmp_path / "malformed.yaml"
    f.write_text("kind: Policy\nmetadata: {name: p\nspec: [\n")
    assert main([str(f) if a == "@" else a for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.endswith("malformed.yaml: invalid YAML: expected ',' or '}', but got ':' (line 3, column 5)\n")
    assert len(err.splitlines()) == 1 and err.count("malformed.yaml") == 1


@pytest.mark.parametrize(("kind", "got"), [
    pytest.param("[]", "list", id="a-list"),
    pytest.param("{}", "dict", id="a-mapping"),
    pytest.param("[ResourceSlice]", "list", id="a-kind-in-a-list"),
    pytest.param("7", "int", id="a-number"),
])
@pytest.mark.parametrize("argv", [
    pytest.param(["allocate", "-o", "text", "--node", "n", "-f", "@"], id="allocate"),
    pytest.param(["validate", "-f", "@"], id="validate"),
])
def test_a_kind_that_is_not_a_string_is_named_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, got: str, argv: list[str]) -> None:
    from audit.cli.main import main

    f = tmp_path / "objects.yaml"
    f.write_text(f"kind: {kind}\nmetadata: {{name: x}}\n")
    assert main([str(f) if a == "@" else a for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.endswith(f"objects.yaml#1: kind: expected a string, got {got}\n") and len(err.splitlines()) == 1
