def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def _fetch(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in conn.execute(sql, params).fetchall()]
        finally:
            conn.close()

    sql = "SELECT id, user_id, carrier_name, plan_name, member_id, status FROM insurance_policies WHERE carrier_name = 'Blue Harbor Health' ORDER BY id"
    full = "SELECT * FROM insurance_policies ORDER BY id"
    return {
        "expected_answer": "BHH-448812307",
        "blue_harbor_policies": _fetch(final_db_path, sql),
        "insurance_unchanged": _fetch(initial_db_path, full) == _fetch(final_db_path, full),
        "note": "Read-only task: user 1's Gold HMO 500 policy; the inactive Silver HMO 1500 (BHH-301177642) and user 2's Gold policy (BHH-552019834) are distractors.",
    }
