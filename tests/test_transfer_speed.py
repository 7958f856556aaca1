"""The transfer-speed page: each engine per task from a cold cache, compared with the transfer page's parts, resumed."""

from __future__ import annotations

import pytest

from layerwise.benchmarks import PageContext, ResultsStore
from layerwise.benchmarks.catalog import get_page


@pytest.fixture()
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("LAYERWISE_HOME", str(tmp_path / "home"))
    return tmp_path


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_speed_parts_per_engine_and_task_compare_with_the_transfer_page_and_resume(tiny_bert, home, monkeypatch):
    from conftest import write_senteval
    from layerwise.benchmarks.lc import transfer_speed
    from layerwise.benchmarks.lc.transfer_run import TransferRunConfig, run_transfer_tasks
    from layerwise.benchmarks.lc.transfer_speed import SpeedConfig, render_transfer_speed, run_transfer_speed
    from layerwise.methods.lc.transfer import TransferProtocol

    data = write_senteval(home / "data", n=40)
    store = ResultsStore(home / "store")
    protocol = TransferProtocol(n_outer=2, n_inner=2)
    run_transfer_tasks(TransferRunConfig(model=str(tiny_bert), tasks=("cr", "mrpc"), n_jobs=1, data_dir=str(data),
                                         protocol=protocol), store)  # the transfer page's parts
    config = SpeedConfig(model=str(tiny_bert), tasks=("cr", "mrpc"), protocol=protocol, n_jobs=1,
                         data_dir=str(data))
    parts = run_transfer_speed(config, store, command=["layerwise", "test"])
    assert sorted(p.name for p in parts) == ["fast-cr", "fast-mrpc", "reference-cr", "reference-mrpc"]
    for p in parts:
        c = p.payload["comparison"]
        assert c["stored"] and c["splits"] == 2 and c["same_layers"] == 2 and c["same_test"] == 2, p.name
        assert p.payload["encode_seconds"] > 0 and p.payload["protocol_seconds"] > 0
        assert p.key["commit"] == (p.runs[-1]["environment"].get("source") or {}).get("commit")
    # a cut-off run: the parts already stored are kept, only the missing one is computed (encoding its task again)
    store.path("transfer-speed", "reference-mrpc", parts[3].key).unlink()
    calls = []
    real = transfer_speed.run_transfer
    monkeypatch.setattr(transfer_speed, "run_transfer", lambda *a, **k: calls.append(k["engine"]) or real(*a, **k))
    again = run_transfer_speed(config, store)
    assert calls == ["reference"] and [p.payload["layers"] for p in again] == [p.payload["layers"] for p in parts]
    page = render_transfer_speed(store)
    assert "| cr | 40 |" in page and "| mrpc | 60 |" in page and "total minutes" in page
    assert "None: every outer split of every task chose the stored subset" in page
    with pytest.raises(ValueError, match="unknown screen engine"):
        SpeedConfig(engines=("slow",))


def test_speed_page_is_registered_with_the_code_it_measures_and_refuses_unknown_options(tmp_path):
    page = get_page("transfer-speed")
    assert "src/layerwise/methods/lc/screen.py" in page.sources()
    ctx = PageContext(store=ResultsStore(tmp_path), output=tmp_path, options={"bogus": 1})
    with pytest.raises(ValueError, match="unknown option"):
        page.run(ctx)
    with pytest.raises(ValueError, match="no stored run of the transfer-speed page"):
        page.render(PageContext(store=ResultsStore(tmp_path), output=tmp_path))
