"""``benchmarks/house_figures.py`` counts what issue 48 counts: product lines and modules of ``components/``,
``pipelines/`` and ``kfp_finetune/``, tests left out, against the issue's target of 22,000 lines."""

import shutil

import pytest

from benchmarks import house_figures


def _tree(tmp_path):
    (tmp_path / "components/x/tests").mkdir(parents=True)
    (tmp_path / "pipelines").mkdir()
    (tmp_path / "kfp_finetune").mkdir()
    (tmp_path / "kfp_finetune/__init__.py").write_text("x = 1\n")
    (tmp_path / "components/x/a.py").write_text("a = 1\nb = 2\n")
    (tmp_path / "components/x/tests/test_a.py").write_text("x\n" * 50)
    (tmp_path / "pipelines/long.py").write_text("".join(f"v{i} = {i}\n" for i in range(401)))
    (tmp_path / "notes.py").write_text("outside\n")
    return tmp_path


def test_lines_and_modules_are_the_products(tmp_path):
    counts = house_figures.line_counts(_tree(tmp_path))
    assert counts == {"components/x/a.py": 2, "kfp_finetune/__init__.py": 1, "pipelines/long.py": 401}


def test_the_figures_are_the_lines_and_modules_against_issue_48s_target(tmp_path, capsys, monkeypatch):
    found = house_figures.figures(_tree(tmp_path))
    assert {name: entry["value"] for name, entry in found.items()} == {
        "house.product_lines": 404,
        "house.product_modules": 3,
        "house.modules_over_400": 1,
    }
    assert found["house.product_lines"]["text"] == "404"
    assert house_figures.TARGET_LINES == 22_000
    monkeypatch.setattr(house_figures, "duplicate_pairs", lambda root, rows: (None, ["not counted here"]))
    house_figures.main([])
    assert "(target <= 22000)" in capsys.readouterr().out


@pytest.mark.skipif(shutil.which("duplicates") is None, reason="the duplicates command is not installed")
def test_duplicate_pairs_are_counted_in_product_code_only(tmp_path):
    root = _tree(tmp_path)
    body = "\n".join(
        [
            "import os",
            "",
            "",
            "def home(user):",
            "    path = os.path.join('/home', user)",
            "    if not os.path.isdir(path):",
            "        raise FileNotFoundError(path)",
            "    names = sorted(os.listdir(path))",
            "    return [n for n in names if n]",
            "",
        ]
    )
    (root / "components/x/b.py").write_text(body)
    (root / "pipelines/c.py").write_text(body)
    (root / "components/x/tests/test_b.py").write_text(body)
    count, report = house_figures.duplicate_pairs(root, rows=5)
    assert count == 1, report
    assert "tests" not in "\n".join(report)


def test_wiring_rows_are_the_pairs_of_two_pipelines_or_components():
    report = [
        "3 pairs of places (9 files read), ...",
        "  D1 pipelines/training/osft/pipeline.py:175-351 ~ pipelines/training/sft/pipeline.py:176-352 (+6 more runs)",
        "  D2 components/x/component.py:45-51 ~ pipelines/training/lora/pipeline.py:134-140 shape",
        "  D3 components/x/validate.py:270-275 ~ pipelines/training/lora/pipeline.py:396-401 shape",
        "  left out: 6 runs of 6 lines that stand in more than 8 places each (too common to list)",
    ]
    assert house_figures.wiring_rows(report) == report[1:3]
