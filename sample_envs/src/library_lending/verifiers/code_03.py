def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3
    from datetime import datetime, timedelta

    def _query(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        rows = conn.execute(sql, params).fetchall()
        conn.close()
        return rows

    target = _query(initial_db_path, "SELECT l.id, l.due_date, l.renewal_count FROM loans l JOIN copies c ON c.id = l.copy_id "
                                     "JOIN titles t ON t.id = c.title_id WHERE l.member_id = 1 AND l.status = 'active' "
                                     "AND t.title = 'Clockwork Harbor' AND t.format = 'print'")
    if len(target) != 1:
        return {"result": "others"}
    loan_id, due_before, renewals_before = target[0]
    after = _query(final_db_path, "SELECT due_date, renewal_count, status, returned_date FROM loans WHERE id = ?", (loan_id,))
    if len(after) != 1:
        return {"result": "others"}
    due_after, renewals_after, status_after, returned_after = after[0]
    expected_due = (datetime.strptime(due_before, "%Y-%m-%d") + timedelta(days=14)).strftime("%Y-%m-%d")
    if due_after != expected_due or renewals_after != renewals_before + 1:
        return {"result": "others"}
    if status_after != "active" or returned_after is not None:
        return {"result": "others"}
    others_before = _query(initial_db_path, "SELECT * FROM loans WHERE id != ? ORDER BY id", (loan_id,))
    others_after = _query(final_db_path, "SELECT * FROM loans WHERE id != ? ORDER BY id", (loan_id,))
    if others_before != others_after:
        return {"result": "others"}
    return {"result": "complete"}
