def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def _fetch(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in conn.execute(sql, params).fetchall()]
        finally:
            conn.close()

    sql = ("SELECT id, user_id, test_name, result_value, unit, reference_range, flag, status, collected_at "
           "FROM lab_results WHERE test_name LIKE '%A1c%' ORDER BY id")
    full = "SELECT * FROM lab_results ORDER BY id"
    return {
        "expected_answer": "6.4 %",
        "user1_a1c_results": [r for r in _fetch(final_db_path, sql) if r["user_id"] == 1],
        "other_users_a1c_results": [r for r in _fetch(final_db_path, sql) if r["user_id"] != 1],
        "lab_results_unchanged": _fetch(initial_db_path, full) == _fetch(final_db_path, full),
        "note": "Read-only task: the final answer must state the 2026-02-18 Hemoglobin A1c result 6.4 with unit %.",
    }
