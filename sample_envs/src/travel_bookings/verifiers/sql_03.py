def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def _rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in conn.execute(sql, params).fetchall()]
        finally:
            conn.close()

    sql = "SELECT la.id, la.user_id, a.name AS airline, la.membership_number, la.tier, la.points_balance FROM loyalty_accounts la JOIN airlines a ON a.id = la.airline_id ORDER BY la.id"
    before = _rows(initial_db_path, sql)
    after = _rows(final_db_path, sql)
    target = [r for r in after if r["user_id"] == 1 and r["airline"] == "Aurora Airways"]
    return {
        "task": "read-only: points balance of user 1's Aurora Airways loyalty account must appear in the final answer",
        "expected_answer": target[0]["points_balance"] if target else None,
        "target_account": target,
        "distractors": "Aurora Regional Express account (3120 points) of user 1 and user 2's Aurora Airways account (97500 points)",
        "loyalty_accounts_unchanged": before == after,
        "loyalty_accounts_after": after,
    }
