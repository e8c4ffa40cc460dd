"""engine/corpus/summary.py: the first path segments that only one side of the training split uses are listed."""

from __future__ import annotations

from engine.corpus import summary


def rec(path: str, label: str, split: str = "train") -> dict:
    return {"split": split, "label": label, "attack_class": "scanner" if label == "block" else None, "source": "t",
            "gen": "attack/path" if label == "block" else "page/blog", "path": path, "method": "GET", "query": "",
            "headers": [], "body": ""}  # fmt: skip


def test_a_folder_only_attacks_use_is_listed_and_printed_and_a_shared_one_is_not():
    st = summary.Stats()
    for i in range(120):
        st.add(rec(f"/site/backup{i}.sql", "block"))
        st.add(rec(f"/blog/post-{i}", "allow"))
        st.add(rec(f"/api/items/{i}", "allow" if i % 2 else "block"))
        st.add(rec(f"/site/page-{i}", "allow", split="test"))  # only the training split counts
    st.add(rec("/rare/x.php", "block"))
    out = st.finish(seed=1, scale=1.0, counts={"train": 361, "test": 120}, notes=[])
    assert out["one_sided_folders"] == {"blog": {"attack": 0, "benign": 120}, "site": {"attack": 120, "benign": 0}}
    text = summary.table(out)
    assert "first path segments only attacks use in training" in text and "/site/ 120" in text and "/blog/" not in text
