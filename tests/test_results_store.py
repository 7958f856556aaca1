"""The results store: a part is reused only under exactly its key, writes are atomic, other keys stay."""

import json

import pytest

from layerwise.experiments import Part, ResultsStore, get_page, key_digest


def _key(**over):
    key = {"model": {"weights_sha256": "a" * 64, "tokenizer_sha256": "b" * 64}, "max_length": 256,
           "dtype": "float32", "data": {"name": "stsb", "checksum": "c" * 64}, "protocol": {"splits": 5, "seed": 0}}
    key.update(over)
    return key


def test_round_trip_and_digest_is_order_free(tmp_path):
    store = ResultsStore(tmp_path)
    key = _key()
    store.save(Part("page", "minilm/stsb", key, {"score": 81.5}))
    got = store.load("page", "minilm/stsb", dict(reversed(list(key.items()))))
    assert got.payload == {"score": 81.5} and got.complete
    assert key_digest(key) == key_digest(dict(reversed(list(key.items()))))


@pytest.mark.parametrize("change", [{"max_length": 8}, {"dtype": "bfloat16"},
                                    {"data": {"name": "stsb", "checksum": "d" * 64}},
                                    {"protocol": {"splits": 5, "seed": 1}},
                                    {"model": {"weights_sha256": "a" * 64, "tokenizer_sha256": "e" * 64}}])
def test_any_changed_setting_invalidates_and_keeps_the_old_part(tmp_path, change, caplog):
    store = ResultsStore(tmp_path)
    store.save(Part("page", "p", _key(), {"score": 1.0}))
    with caplog.at_level("INFO", logger="layerwise.experiments.store"):
        assert store.load("page", "p", _key(**change)) is None
    assert "other settings" in caplog.text
    assert store.load("page", "p", _key()).payload == {"score": 1.0}  # not overwritten, not deleted
    store.save(Part("page", "p", _key(**change), {"score": 2.0}))
    assert len(store.parts("page")) == 2


def test_a_file_whose_key_was_edited_is_refused(tmp_path):
    store = ResultsStore(tmp_path)
    path = store.save(Part("page", "p", _key(), {"score": 1.0}))
    doc = json.loads(path.read_text())
    doc["key"]["max_length"] = 8
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="does not hold the part"):
        store.load("page", "p", _key())


def test_unknown_page_suggests_a_close_name():
    with pytest.raises(ValueError, match="no results page"):
        get_page("lc-stz")
