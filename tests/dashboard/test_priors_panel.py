"""The Runs page's priors panel: what a save changes, and what it tells the user."""

from __future__ import annotations

from scalewatch.dashboard.priors_panel import changes_for, status_text


def test_a_ticked_box_learns_from_the_project_and_an_unticked_one_clears() -> None:
    none = {"noise_prior": None, "b_prior": None}
    assert changes_for(none, ["b_prior"]) == {"b_prior": "project"}
    assert changes_for(none, []) == {}
    learned = {"noise_prior": "project", "b_prior": "project"}
    assert changes_for(learned, ["noise_prior"]) == {"b_prior": None}
    assert changes_for(learned, ["noise_prior", "b_prior"]) == {}


def test_an_explicit_prior_stays_while_ticked_and_is_named() -> None:
    explicit = {"noise_prior": [0.8, 0.05], "b_prior": None}
    assert changes_for(explicit, ["noise_prior"]) == {}
    assert changes_for(explicit, []) == {"noise_prior": None}
    text = status_text(explicit, 2)
    assert "2 finished runs to learn from" in text
    assert "Explicit noise (rho mean, sd) prior set through the API: [0.8, 0.05]" in text
    assert "1 finished run to learn from" in status_text(explicit, 1)
