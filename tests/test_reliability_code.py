"""Reliability, code execution: no folder's code ever runs (issue 27's first class).

Every case plants a Python file that would leave a marker file if it ran, and checks the marker is absent as well
as the one-line refusal. An export names its trained modules by the import path of the installed ``layerwise``
classes and holds no ``.py`` file, so nothing here ever needs ``trust_remote_code``.
"""

from __future__ import annotations

import json
import shutil

import pytest

from layerwise.methods.lc.export import SubsetExport, export_layer_subset

CORPUS = "a man is playing guitar .\nthe dog is swimming in the water .\n"


def _plant(folder, marker):
    """A modeling file that writes ``marker`` when imported; returns its module name."""
    (folder / "modeling_evil.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n", encoding="utf-8")
    return "modeling_evil"


@pytest.fixture()
def export(tiny_bert, env):
    return export_layer_subset(SubsetExport(model=str(tiny_bert), layers=(0, 2), max_length=32), env / "export")


@pytest.mark.reliability("Code execution")
def test_encode_refuses_a_folder_whose_modules_json_names_a_file_beside_it(export, env, case, capsys):
    marker = env / "ran"
    evil = env / "evil"
    shutil.copytree(export, evil)
    name = _plant(evil, marker)
    modules = json.loads((evil / "modules.json").read_text())
    modules[-1]["type"] = f"{name}.Pooling"
    (evil / "modules.json").write_text(json.dumps(modules))
    (env / "corpus.txt").write_text(CORPUS)
    case.cli_error(["encode", env / "corpus.txt", env / "out.npy", "--folder", evil], capsys, outcome="refusal",
                   what="encode --folder on a folder whose modules.json names a .py file beside it",
                   match=("modeling_evil",))
    assert not marker.exists() and not (env / "out.npy").exists()


@pytest.mark.reliability("Code execution")
def test_encode_refuses_a_folder_whose_config_has_an_auto_map(export, env, case, capsys):
    marker = env / "ran"
    evil = env / "evil"
    shutil.copytree(export, evil)
    name = _plant(evil, marker)
    config = json.loads((evil / "config.json").read_text())
    (evil / "config.json").write_text(json.dumps({**config, "auto_map": {"AutoModel": f"{name}.Model"}}))
    (env / "corpus.txt").write_text(CORPUS)
    case.cli_error(["encode", env / "corpus.txt", env / "out.npy", "--folder", evil], capsys, outcome="refusal",
                   what="encode --folder on a folder whose config.json has an auto_map", match=("auto_map",))
    assert not marker.exists()


@pytest.mark.reliability("Code execution")
def test_the_trust_remote_code_option_is_gone(export, env, case, capsys):
    (env / "corpus.txt").write_text(CORPUS)
    case.cli_error(["encode", env / "corpus.txt", env / "out.npy", "--folder", export, "--trust-remote-code"],
                   capsys, what="encode --trust-remote-code (was: ran any .py file in the folder)",
                   match=("--trust-remote-code",))


@pytest.mark.reliability("Code execution")
def test_export_refuses_a_source_whose_config_names_code(tiny_bert, env, case, capsys):
    marker = env / "ran"
    source = env / "source"
    shutil.copytree(tiny_bert, source)
    name = _plant(source, marker)
    config = json.loads((source / "config.json").read_text())
    (source / "config.json").write_text(json.dumps({**config, "auto_map": {"AutoModel": f"{name}.Model"}}))
    case.cli_error(["export", source, env / "dest", "--layers", "0,2"], capsys, outcome="refusal",
                   what="export of a source folder whose config.json has an auto_map (was: copied into the export)",
                   match=("auto_map",))
    assert not marker.exists() and not (env / "dest").exists()


@pytest.mark.reliability("Code execution")
def test_a_trained_pooler_export_holds_no_code(tiny_bert, env, case, capsys):
    from layerwise import LayerAttentionPooler
    from layerwise.encoders.folder_code import code_references

    pooler = LayerAttentionPooler(str(tiny_bert), steps=2, batch_size=4, max_length=16, seed=0)
    pooler.fit(CORPUS.split("\n")[:2] * 4)
    saved = pooler.save(env / "pooler")
    dest = env / "exported"
    seen = case.run(["export", saved, dest], capsys)
    folder = dest if seen.code == 0 else saved  # a saved estimator is itself an export folder
    assert not list(folder.rglob("*.py")) and code_references(folder) == []
    modules = json.loads((folder / "modules.json").read_text())
    assert all(m["type"].startswith(("sentence_transformers.", "layerwise.")) for m in modules)
    case.record("a trained layer-attention pooler saved and exported", f"layerwise export {saved} {dest}",
                "correct result", "modules.json names only sentence_transformers.* and installed layerwise.* "
                "classes; no .py file, no auto_map", code=seen.code)
