"""τ²-bench domains as our own code (issue 15): the loader, the tools' effects and errors, the gold replay scoring
1.0 on the DB and environment-assertion components for every retail and telecom base task, a corrupted sequence
scoring 0, and the domains as episodes of the worker pool (reset by copy, attach, database diffs)."""
from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from awm_engine.bench.tau2.data import Tau2Data
from awm_engine.bench.tau2.environment import build_env
from awm_engine.bench.tau2.evaluation import evaluate_simulation
from awm_engine.bench.tau2.evaluation import gold_messages as engine_gold_messages
from awm_engine.bench.tau2.tasks import Task
from awm_engine.bench.tau2.toolkit import calculate_expression, to_json_str
from tests.conftest import SHARED

TAU2 = SHARED / "data" / "tau2"
FIXTURE = Path(__file__).parent / "fixtures" / "tau2"
AIRLINE_DB = FIXTURE / "domains" / "airline" / "db.json"


@pytest.fixture(scope="module")
def tau2_data() -> Tau2Data:
    if not (TAU2 / "domains" / "retail" / "tasks.json").is_file():
        pytest.skip(f"τ²-bench data not found at {TAU2} (../shared is absent)")
    return Tau2Data(TAU2, airline_db=AIRLINE_DB)


@pytest.fixture(scope="module")
def fixture_data() -> Tau2Data:
    return Tau2Data(FIXTURE)


def gold_messages(domain_data, task: Task, actions=None) -> list[dict]:
    """A conversation whose tool calls are ``actions`` (the gold ones by default), ended by the user's stop token."""
    return engine_gold_messages(domain_data, task, actions)


def score(domain_data, task, messages, reason="user_stop"):
    return asyncio.run(evaluate_simulation(domain_data, task, messages, reason))


# -- the loader -----------------------------------------------------------------------------------------------

def test_loader_reads_splits_versions_and_reports_problems(tau2_data):
    retail, telecom, airline = (tau2_data.domain(d) for d in ("retail", "telecom", "airline"))
    assert {k: len(v) for k, v in retail.splits.items()} == {"train": 74, "test": 40, "base": 114}
    assert retail.version.name == "verified" and retail.version.how == "fingerprint"
    assert airline.version.name == "verified"
    assert len(telecom.splits["base"]) == 114 and len(telecom.splits["small"]) == 20
    assert "full" not in telecom.splits  # 2,285 ids, only 134 tasks in these files
    assert any("split 'full'" in i.message for i in telecom.issues)
    assert telecom.version.name == "telecom-base"
    # no reward_basis in the verified fork: [DB, COMMUNICATE]; telecom: ENV_ASSERTION (+ ACTION for 20)
    assert {tuple(t.basis) for t in retail.split_tasks()} == {("DB", "COMMUNICATE")}
    bases = [tuple(t.basis) for t in telecom.split_tasks()]
    assert bases.count(("ENV_ASSERTION",)) == 94 and bases.count(("ENV_ASSERTION", "ACTION")) == 20
    assert telecom.policy.startswith("<main_policy>\n") and "</tech_support_policy>" in telecom.policy
    assert "###STOP###" in telecom.guidelines()


def test_loader_survives_malformed_files(tmp_path):
    domain = tmp_path / "domains" / "retail"
    domain.mkdir(parents=True)
    good = {"id": "a", "user_scenario": {"instructions": "call about an order"},
            "evaluation_criteria": {"actions": []}}
    (domain / "tasks.json").write_text(json.dumps([good, {"id": 3}, "text", {**good, "id": "a"},
                                                   {**good, "id": "b", "user_scenario": {"persona": 5}}]))
    (domain / "split_tasks.json").write_text(json.dumps({"base": ["a", "zz"], "train": ["a"], "test": "a"}))
    (domain / "db.json").write_text("{not json")
    data = Tau2Data(tmp_path)
    retail = data.domain("retail")
    assert list(retail.tasks) == ["a"]
    assert retail.splits == {"train": ["a"]}
    problems = " | ".join(str(p) for p in data.problems())
    for expected in ("task #1", "task #2", "duplicate task id 'a'", "task #4", "split 'base'", "split 'test'",
                     "cannot read the database", "no domain directory"):
        assert expected in problems, expected
    with pytest.raises(KeyError, match="no usable split 'base'"):
        retail.split_tasks("base")


def test_airline_without_its_database_says_how_to_supply_it(tmp_path):
    (tmp_path / "domains" / "airline").mkdir(parents=True)
    problem = Tau2Data(tmp_path).domain("airline").db_problem()
    assert "--airline-db" in problem


# -- tool semantics -------------------------------------------------------------------------------------------

def test_tool_results_serialize_as_tau2(fixture_data):
    env = build_env(fixture_data.domain("airline"))
    assert env.get_response("calculate", {"expression": "(120 + 135) * 1"}).content == "255.0"
    assert env.get_response("calculate", {"expression": "2 ** 999999999"}).error
    assert env.get_response("calculate", {"expression": "import os"}).content == \
        "Error: Invalid characters in expression"
    assert env.get_response("nope", {}).content == "Error: Tool 'nope' not found."
    missing = env.get_response("get_user_details", {})
    assert missing.error and "missing 1 required positional argument: 'user_id'" in missing.content
    assert env.get_response("get_user_details", {"user_id": "x"}).content == "Error: User x not found"
    assert env.get_response("get_flight_status", {"flight_number": "HAT300", "date": "2024-05-15"}).content == \
        "on time"
    # bare numbers become strings inside lists and dicts
    assert to_json_str([1, 2.5, True, None]) == '["1", "2.5", "True", null]'
    assert calculate_expression("7 / 2") == "3.5"


def test_airline_quirks(fixture_data):
    env = build_env(fixture_data.domain("airline"))
    db = env.tools.db
    seats = db.flights["HAT136"].dates["2024-05-20"].available_seats["economy"]
    booking = {"user_id": "mia_li_3668", "origin": "JFK", "destination": "SEA", "flight_type": "one_way",
               "cabin": "economy", "flights": [{"flight_number": "HAT136", "date": "2024-05-20"},
                                               {"flight_number": "HAT039", "date": "2024-05-20"}],
               "passengers": [{"first_name": "Mia", "last_name": "Li", "dob": "1990-04-05"}],
               "payment_methods": [{"payment_id": "certificate_7504069", "amount": 250},
                                   {"payment_id": "credit_card_4421486", "amount": 4}],
               "total_baggages": 3, "nonfree_baggages": 0, "insurance": "no"}
    wrong = env.get_response("book_reservation", booking)
    assert wrong.content == "Error: Payment amount does not add up, total price is 255, but paid 254"
    booking["payment_methods"][1]["amount"] = 5
    made = json.loads(env.get_response("book_reservation", booking).content)
    assert made["reservation_id"] == "HATHAT" and made["created_at"] == "2024-05-15T15:00:00"
    assert "certificate_7504069" not in db.users["mia_li_3668"].payment_methods  # used certificates go
    assert db.flights["HAT136"].dates["2024-05-20"].available_seats["economy"] == seats - 1
    cancelled = json.loads(env.get_response("cancel_reservation", {"reservation_id": "HATHAT"}).content)
    assert cancelled["status"] == "cancelled" and [p["amount"] for p in cancelled["payment_history"]] == \
        [250, 5, -250, -5]
    assert db.flights["HAT136"].dates["2024-05-20"].available_seats["economy"] == seats - 1  # seats not released
    sent = env.get_response("send_certificate", {"user_id": "anya_garcia_5901", "amount": 50}).content
    assert sent == "Certificate certificate_3221322 added to user anya_garcia_5901 with amount 50."
    # a flight change is charged to a gift card (which must cover it)
    change = env.get_response("update_reservation_flights", {
        "reservation_id": "3RK2T9", "cabin": "business",
        "flights": [{"flight_number": "HAT300", "date": "2024-05-26"}], "payment_id": "gift_card_5000002"})
    assert change.content == "Error: Gift card balance is not enough"


def test_retail_quirks(tau2_data):
    retail = tau2_data.domain("retail")
    env = build_env(retail)
    db = env.tools.db
    order = next(o for o in db.orders.values() if o.status == "pending" and len(o.items) >= 2
                 and len({i.product_id for i in o.items}) == len(o.items))
    user = db.users[order.user_id]
    new_ids = []
    for item in order.items[:2]:
        product = db.products[item.product_id]
        new_ids.append(next(v.item_id for v in product.variants.values()
                            if v.available and v.item_id != item.item_id))
    method = order.payment_history[0].payment_method_id
    result = env.get_response("modify_pending_order_items", {
        "order_id": order.order_id, "item_ids": [i.item_id for i in order.items[:2]], "new_item_ids": new_ids,
        "payment_method_id": method})
    assert not result.error, result.content
    modified = db.orders[order.order_id]
    last = db.products[modified.items[1].product_id].variants[new_ids[1]]
    assert modified.status == "pending (item modified)"
    # every modified item takes the price and options of the last new variant (τ-bench's quirk)
    assert modified.items[0].price == last.price and modified.items[0].options == last.options
    again = env.get_response("modify_pending_order_items", {"order_id": order.order_id, "item_ids": [],
                                                            "new_item_ids": [], "payment_method_id": method})
    assert again.content == "Error: Non-pending order cannot be modified"  # exactly "pending": only once
    # but the address may still change ("contains pending")
    assert not env.get_response("modify_pending_order_address", {
        "order_id": order.order_id, "address1": "1 A St", "address2": "", "city": "X", "state": "CA",
        "country": "USA", "zip": "12345"}).error
    assert env.get_response("cancel_pending_order", {"order_id": order.order_id, "reason": "changed my mind"}
                            ).content == "Error: Non-pending order cannot be cancelled"
    assert user.user_id == env.get_response("find_user_id_by_email", {"email": user.email.upper()}).content
    assert json.loads(env.get_response("list_all_product_types", {}).content) == \
        dict(sorted({p.name: p.product_id for p in db.products.values()}.items()))


def test_telecom_device_simulation(tau2_data):
    telecom = tau2_data.domain("telecom")
    task = telecom.task("[mobile_data_issue]data_mode_off|data_usage_exceeded[PERSONA:None]")
    env = build_env(telecom, task)
    phone = env.user_tools
    assert env.get_response("run_speed_test", {}, "user").content == "Speed test failed: No Connection."
    assert phone.surroundings.mobile_data_usage_exceeded  # synced from the CRM
    env.get_response("toggle_data", {}, "user")
    refuel = json.loads(env.get_response("refuel_data", {"customer_id": "C1001", "line_id": "L1002",
                                                         "gb_amount": 2.0}).content)
    assert refuel["new_data_refueling_gb"] == "2.0"  # bare numbers in a dict are strings
    assert not phone.surroundings.mobile_data_usage_exceeded
    assert env.get_response("run_speed_test", {}, "user").content.startswith("Speed Test Result: 275.00 Mbps "
                                                                              "(Excellent)")
    # the user's tools are not the agent's
    assert env.get_response("toggle_data", {}).content == "Error: Tool 'toggle_data' not found."
    # break_vpn degrades the default VPN: reconnecting later in the same environment gives a poor VPN
    env.user_tools.break_vpn()
    env.get_response("disconnect_vpn", {}, "user")
    env.get_response("connect_vpn", {}, "user")
    assert phone.device.vpn_details.server_performance.value == "poor"
    assert env.get_response("run_speed_test", {}, "user").content.startswith("Speed Test Result: 27.50 Mbps (Good)")


# -- scoring: gold replays --------------------------------------------------------------------------------------

@pytest.mark.parametrize("part", range(3))  # 38 tasks a test: each stays short on a busy machine
@pytest.mark.parametrize("domain", ["retail", "telecom"])
def test_gold_actions_score_one_on_db_and_assertions_for_every_base_task(tau2_data, domain, part):
    data = tau2_data.domain(domain)
    tasks = data.split_tasks("base")
    assert len(tasks) == 114
    failures = []
    for task in tasks[part * 38:(part + 1) * 38]:
        info = score(data, task, gold_messages(data, task))
        parts = {k: v for k, v in info.reward_breakdown.items() if k in ("DB", "ENV_ASSERTION")}
        if set(parts.values()) != {1.0}:  # retail's basis has DB, telecom's ENV_ASSERTION
            failures.append((task.id, info.reward_breakdown))
    assert failures == []


def test_gold_actions_of_the_airline_fixture_score_one(fixture_data):
    airline = fixture_data.domain("airline")
    for task in airline.split_tasks():
        info = score(airline, task, gold_messages(airline, task))
        assert info.reward_breakdown["DB"] == 1.0, task.id
    booking = airline.task("1")
    messages = gold_messages(airline, booking)
    assert score(airline, booking, messages).reward == 0.0  # COMMUNICATE: '255' was never said
    messages.insert(-1, {"role": "assistant", "content": "The total is $2,55 - I mean 255 dollars."})
    assert score(airline, booking, messages).reward == 1.0


def test_shared_airline_tasks_run_on_the_fixture_database(tau2_data):
    airline = tau2_data.domain("airline")
    for task_id in ("19", "20", "40"):
        task = airline.task(task_id)
        info = score(airline, task, gold_messages(airline, task))
        assert info.reward == 1.0, (task_id, info.to_dict())


def test_corrupted_action_sequences_score_zero(tau2_data):
    retail = tau2_data.domain("retail")
    task = next(t for t in retail.split_tasks() if sum(1 for a in t.evaluation_criteria.actions
                                                       if a.name.startswith(("cancel", "modify", "exchange",
                                                                             "return"))) >= 2)
    writes = [a for a in task.evaluation_criteria.actions]
    # drop the last write
    last = max(i for i, a in enumerate(writes) if a.name.startswith(("cancel", "modify", "exchange", "return")))
    dropped = writes[:last] + writes[last + 1:]
    assert score(retail, task, gold_messages(retail, task, dropped)).reward == 0.0
    # an extra write
    extra = writes + [writes[last].model_copy(update={"name": "modify_user_address", "arguments": {
        "user_id": retail.fresh_db().orders[next(iter(retail.fresh_db().orders))].user_id, "address1": "x",
        "address2": "", "city": "y", "state": "z", "country": "USA", "zip": "00000"}})]
    assert score(retail, task, gold_messages(retail, task, extra)).reward == 0.0
    # the right calls in the wrong order can still reach the same state, but a swapped argument cannot
    swapped = [a.model_copy(update={"arguments": {**a.arguments, "reason": "ordered by mistake"
                                                  if a.arguments.get("reason") == "no longer needed"
                                                  else "no longer needed"}})
               if a.name == "cancel_pending_order" else a for a in writes]
    if swapped != writes:
        assert score(retail, task, gold_messages(retail, task, swapped)).reward == 0.0
    # a run that did not stop scores 0 whatever it did
    assert score(retail, task, gold_messages(retail, task), "max_steps").reward == 0.0
    # telecom: the assertions fail when the user does not fix the phone
    telecom = tau2_data.domain("telecom")
    ttask = telecom.split_tasks()[0]
    info = score(telecom, ttask, gold_messages(telecom, ttask, []))
    assert info.reward == 0.0 and info.reward_breakdown["ENV_ASSERTION"] == 0.0


def test_action_component_matches_names_and_compare_args(tau2_data):
    telecom = tau2_data.domain("telecom")
    task = next(t for t in telecom.split_tasks() if "ACTION" in t.basis)
    info = score(telecom, task, gold_messages(telecom, task))
    assert info.reward == 1.0 and all(c["action_match"] for c in info.action_checks)
    nothing = score(telecom, task, gold_messages(telecom, task, []))
    assert nothing.reward_breakdown["ACTION"] == 0.0


# -- episodes in the worker pool ------------------------------------------------------------------------------

def test_domains_open_as_pool_episodes(tau2_data, tmp_path):
    from awm_engine.bench.tau2.episode import DomainScenario
    from awm_engine.db.diff import diff_databases
    from awm_engine.runtime.pool import EnvPool

    async def main():
        retail = DomainScenario(tau2_data, "retail")
        telecom = DomainScenario(tau2_data, "telecom")
        pending = next(o for o in retail.domain_data.fresh_db().orders.values() if o.status == "pending")
        async with EnvPool(workers=1) as pool:
            episode = await pool.open_episode(retail, run_dir=tmp_path / "r", options={"task_id": retail.task_ids[0]})
            assert {t["name"] for t in episode.list_tools()} >= {"cancel_pending_order", "get_item_details"}
            result = await episode.call_tool("cancel_pending_order", {"order_id": pending.order_id,
                                                                      "reason": "no longer needed"})
            assert not result.is_error and json.loads(result.text)["status"] == "cancelled"
            assert (await episode.call_tool("nope", {})).error_kind == "unknown_tool"
            await episode.reset()  # back to the task's initial state (a copy)
            again = await episode.call_tool("get_order_details", {"order_id": pending.order_id})
            assert json.loads(again.text)["status"] == "pending"
            await episode.call_tool("cancel_pending_order", {"order_id": pending.order_id, "reason": "no longer needed"})
            await episode.close()
            diff = diff_databases(tmp_path / "r" / "initial.db", tmp_path / "r" / "final.db")
            assert [t.table for t in diff.tables] == ["orders"]
            # re-attach to the databases on disk (as after a worker restart, or to replay)
            shutil.copytree(tmp_path / "r", tmp_path / "r2")
            attached = await pool.open_episode(retail, run_dir=tmp_path / "r2", attach=True)
            status = json.loads((await attached.call_tool("get_order_details", {"order_id": pending.order_id})).text)
            assert status["status"] == "cancelled"
            await attached.close()
            # telecom: the user's phone through user:<tool>, synced with the CRM
            task_id = "[mobile_data_issue]data_mode_off|data_usage_exceeded[PERSONA:None]"
            phone = await pool.open_episode(telecom, run_dir=tmp_path / "t", options={"task_id": task_id})
            assert (await phone.call_tool("user:run_speed_test", {})).text == "Speed test failed: No Connection."
            await phone.call_tool("user:toggle_data", {})
            await phone.call_tool("refuel_data", {"customer_id": "C1001", "line_id": "L1002", "gb_amount": 2.0})
            assert "Excellent" in (await phone.call_tool("user:run_speed_test", {})).text
            await phone.close()
            tables = {t.table for t in diff_databases(tmp_path / "t" / "initial.db", tmp_path / "t" / "final.db").tables}
            assert {"lines", "user_device", "user_surroundings"} <= tables

    asyncio.run(main())
