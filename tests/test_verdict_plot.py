"""``compare --plot``: the figure draws every strategy of the verdict, Redistribute included."""

import pytest

import spare_opt as so

pytest.importorskip("matplotlib")


def test_the_verdict_figure_draws_the_redistribute_row_the_text_names(tmp_path, monkeypatch):
    import spare_opt._core.plotting as plotting

    params = so.compare_parameters("trace-400", 12, steps=2000)
    model = so.failure_model_from_rates(12, node_mtbf_seconds=2.0e5, repair_median_seconds=3600.0)
    result = so.compare(params, fault_model=model, semantics="repair", rep_redundancies=[2], spare_redundancies=[3],
                        micro_batches=[1, 4], seeds=1, cycles=1, include_elastic=False, period_factors=(1.0,))
    assert any(row["strategy"] == "redistribute" for row in result.strategies)
    drawn = {}
    save = plotting._save

    def keep(figure, path, force):
        drawn["figure"] = figure
        return save(figure, path, force)

    monkeypatch.setattr(plotting, "_save", keep)
    so.plot_compare(result, tmp_path / "verdict.png")
    ax = drawn["figure"].axes[0]
    labels = ax.get_legend_handles_labels()[1]
    assert "Redistribute" in labels and "CKPT only" in labels and "Rep+CKPT" in labels, labels
    ticks = [tick.get_text() for tick in ax.get_xticklabels()]
    assert {"r = N, m = 1", "r = N, m = 4"} <= set(ticks), ticks
    assert (tmp_path / "verdict.png").stat().st_size > 0
