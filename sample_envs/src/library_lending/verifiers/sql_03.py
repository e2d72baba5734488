def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def _rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        rows = [dict(r) for r in conn.execute(sql, params).fetchall()]
        conn.close()
        return rows

    sql = ("SELECT l.id AS loan_id, t.title, t.format, l.checkout_date, l.due_date, l.renewal_count, l.status, l.returned_date "
           "FROM loans l JOIN copies c ON c.id = l.copy_id JOIN titles t ON t.id = c.title_id WHERE l.member_id = 1 ORDER BY l.id")
    before = _rows(initial_db_path, sql)
    after = _rows(final_db_path, sql)
    changed = [{"before": b, "after": a} for b, a in zip(before, after) if b != a]
    return {
        "task": "renew user 1's active loan of 'Clockwork Harbor' (expected: due date +14 days, renewal_count +1)",
        "clockwork_loans_initial": [r for r in before if r["title"].startswith("Clockwork Harbor")],
        "clockwork_loans_final": [r for r in after if r["title"].startswith("Clockwork Harbor")],
        "changed_user1_loans": changed,
        "user1_loan_count_initial": len(before),
        "user1_loan_count_final": len(after),
    }
