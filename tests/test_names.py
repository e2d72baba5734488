import pytest

from awm_engine.data.names import normalize_scenario_name


@pytest.mark.parametrize("raw, key", [
    ("Citi (Citibank)", "citi_citibank"),
    ("Shop (by Shopify)", "shop_by_shopify"),
    ("E-Commerce 33", "e_commerce_33"),
    ("__A--B__", "a_b"),
    ("Café", "caf"),
    ("SurveyMonkey Apply", "surveymonkey_apply"),
    ("e_commerce_33", "e_commerce_33"),
    ("  spaced  out ", "spaced_out"),
    ("ÅÄÖ", ""),
])
def test_normalize_matches_spec(raw, key):
    assert normalize_scenario_name(raw) == key
