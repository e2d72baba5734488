def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def _rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        rows = [dict(r) for r in conn.execute(sql, params).fetchall()]
        conn.close()
        return rows

    sql = ("SELECT f.id, f.member_id, t.title, f.amount, f.reason, f.status, f.paid_at FROM fines f "
           "LEFT JOIN loans l ON l.id = f.loan_id LEFT JOIN copies c ON c.id = l.copy_id LEFT JOIN titles t ON t.id = c.title_id "
           "WHERE f.member_id = 1 ORDER BY f.id")
    pay_before = _rows(initial_db_path, "SELECT * FROM fine_payments ORDER BY id")
    pay_after = _rows(final_db_path, "SELECT * FROM fine_payments ORDER BY id")
    return {
        "task": "pay user 1's unpaid overdue fine for 'Salt and Cedar' by card",
        "user1_fines_initial": _rows(initial_db_path, sql),
        "user1_fines_final": _rows(final_db_path, sql),
        "new_payments": [p for p in pay_after if p["id"] not in {b["id"] for b in pay_before}],
        "payment_count_initial": len(pay_before),
        "payment_count_final": len(pay_after),
    }
