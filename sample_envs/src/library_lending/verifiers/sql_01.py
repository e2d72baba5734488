def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def _rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        rows = [dict(r) for r in conn.execute(sql, params).fetchall()]
        conn.close()
        return rows

    fines_sql = "SELECT id, member_id, loan_id, amount, reason, description, status, paid_at FROM fines ORDER BY id"
    before = _rows(initial_db_path, fines_sql)
    after = _rows(final_db_path, fines_sql)
    unpaid = [f for f in before if f["member_id"] == 1 and f["status"] == "unpaid"]
    return {
        "task": "read-only: total of user 1's unpaid fines",
        "expected_total_unpaid": round(sum(f["amount"] for f in unpaid), 2),
        "user1_unpaid_fines": unpaid,
        "user1_all_fines": [f for f in before if f["member_id"] == 1],
        "fines_unchanged": before == after,
        "payments_initial": _rows(initial_db_path, "SELECT * FROM fine_payments ORDER BY id"),
        "payments_final": _rows(final_db_path, "SELECT * FROM fine_payments ORDER BY id"),
    }
