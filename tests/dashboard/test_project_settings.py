"""The Runs page's forecast settings panel: what a save changes, and what it tells the user."""

from __future__ import annotations

from scalewatch.dashboard.project_settings import changes_for, said, status_text


def test_a_ticked_box_learns_from_the_project_and_an_unticked_one_clears() -> None:
    none = {"fit_metric": None, "noise_prior": None, "b_prior": None}
    assert changes_for(none, None, ["b_prior"]) == {"b_prior": "project"}
    assert changes_for(none, None, []) == {}
    learned = {"fit_metric": None, "noise_prior": "project", "b_prior": "project"}
    assert changes_for(learned, None, ["noise_prior"]) == {"b_prior": None}
    assert changes_for(learned, None, ["noise_prior", "b_prior"]) == {}


def test_the_metric_is_set_or_back_to_automatic() -> None:
    auto = {"fit_metric": None, "noise_prior": None, "b_prior": None}
    assert changes_for(auto, "val/acc", []) == {"fit_metric": "val/acc"}
    chosen = {**auto, "fit_metric": "val/acc"}
    assert changes_for(chosen, "val/acc", []) == {}
    assert changes_for(chosen, None, []) == {"fit_metric": None}
    assert changes_for(chosen, "", []) == {"fit_metric": None}  # a cleared dropdown
    assert said({"fit_metric": None, "b_prior": "project"}) == "fitted metric automatic, B prior on"


def test_an_explicit_prior_stays_while_ticked_and_is_named() -> None:
    explicit = {"fit_metric": None, "noise_prior": [0.8, 0.05], "b_prior": None}
    assert changes_for(explicit, None, ["noise_prior"]) == {}
    assert changes_for(explicit, None, []) == {"noise_prior": None}
    text = status_text(explicit, 2)
    assert "2 finished runs to learn from" in text
    assert "Explicit noise (rho mean, sd) prior set through the API: [0.8, 0.05]" in text
    assert "1 finished run to learn from" in status_text(explicit, 1)


def test_the_panel_says_which_forecast_width_applies() -> None:
    project = {"fit_metric": None, "noise_prior": None, "b_prior": None}
    assert "a default width learned on public RL curves until 19 runs have finished (17 more " \
        "to go)" in status_text(project, 2)
    assert "(1 more to go)" in status_text(project, 18)
    for finished in (19, 40):
        assert "as wide as this project's finished runs needed" in status_text(project, finished)
        assert "more to go" not in status_text(project, finished)
