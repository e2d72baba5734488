def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def _fetch(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in conn.execute(sql, params).fetchall()]
        finally:
            conn.close()

    sql = "SELECT id, user_id, medication_name, strength, refills_remaining, status FROM prescriptions WHERE medication_name = 'Lisinopril' ORDER BY id"
    full = "SELECT * FROM prescriptions ORDER BY id"
    return {
        "expected_answer": "2 refills remaining",
        "lisinopril_prescriptions": _fetch(final_db_path, sql),
        "prescriptions_unchanged": _fetch(initial_db_path, full) == _fetch(final_db_path, full),
        "refill_request_count": {"initial": len(_fetch(initial_db_path, "SELECT id FROM refill_requests")), "final": len(_fetch(final_db_path, "SELECT id FROM refill_requests"))},
        "note": "Read-only task: user 1's active Lisinopril 10 mg has 2 refills; the expired 5 mg (0) and user 2's 10 mg (5) are distractors.",
    }
