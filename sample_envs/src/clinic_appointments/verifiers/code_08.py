def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3

    def _rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    def _clean(text):
        return " ".join(str(text or "").split()).lower()

    initial_ids = {r[0] for r in _rows(initial_db_path, "SELECT id FROM insurance_policies")}
    new_rows = [r for r in _rows(final_db_path, "SELECT id, user_id, carrier_name, plan_name, member_id, group_number, coverage_start, coverage_end, is_primary, status FROM insurance_policies") if r[0] not in initial_ids]
    if len(new_rows) != 1:
        return {"result": "others"}
    _, user_id, carrier, plan, member, group, start, end, is_primary, status = new_rows[0]
    checks = [
        user_id == 1,
        _clean(carrier) == "summit mutual",
        _clean(plan) == "silver ppo 2000",
        _clean(member) == "smu-5520918",
        _clean(group) == "g-40021",
        str(start or "").startswith("2026-05-01"),
        str(end or "").startswith("2027-04-30"),
        is_primary == 0,
        status == "active",
    ]
    if not all(checks):
        return {"result": "others"}
    return {"result": "complete"}
