def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def _rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        rows = [dict(r) for r in conn.execute(sql, params).fetchall()]
        conn.close()
        return rows

    sql = ("SELECT l.id AS loan_id, l.member_id, t.title, t.format, c.barcode, l.checkout_date, l.due_date, l.returned_date, "
           "l.renewal_count, l.status FROM loans l JOIN copies c ON c.id = l.copy_id JOIN titles t ON t.id = c.title_id "
           "WHERE t.title = 'The Silent Orchard' ORDER BY l.id")
    before = _rows(initial_db_path, sql)
    after = _rows(final_db_path, sql)
    user_loans_before = _rows(initial_db_path, "SELECT * FROM loans WHERE member_id = 1 ORDER BY id")
    user_loans_after = _rows(final_db_path, "SELECT * FROM loans WHERE member_id = 1 ORDER BY id")
    expected = [r["due_date"] for r in before if r["member_id"] == 1 and r["status"] == "active"]
    return {
        "task": "read-only: due date of user 1's current loan of 'The Silent Orchard'",
        "expected_due_date": expected[0] if expected else None,
        "silent_orchard_loans_initial": before,
        "silent_orchard_loans_final": after,
        "user1_loans_unchanged": user_loans_before == user_loans_after,
    }
