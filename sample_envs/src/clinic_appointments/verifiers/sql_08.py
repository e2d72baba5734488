def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def _fetch(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in conn.execute(sql, params).fetchall()]
        finally:
            conn.close()

    sql = ("SELECT id, user_id, carrier_name, plan_name, member_id, group_number, coverage_start, coverage_end, is_primary, status "
           "FROM insurance_policies ORDER BY id")
    initial = _fetch(initial_db_path, sql)
    final = _fetch(final_db_path, sql)
    initial_ids = {r["id"] for r in initial}
    return {
        "expected": {"carrier_name": "Summit Mutual", "plan_name": "Silver PPO 2000", "member_id": "SMU-5520918", "group_number": "G-40021", "coverage_start": "2026-05-01", "coverage_end": "2027-04-30", "is_primary": 0, "user_id": 1},
        "new_policies": [r for r in final if r["id"] not in initial_ids],
        "changed_existing_policies": [r for r in final if r["id"] in initial_ids and r not in initial],
        "policy_count": {"initial": len(initial), "final": len(final)},
    }
