def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3

    def _query(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        rows = conn.execute(sql, params).fetchall()
        conn.close()
        return rows

    target = _query(initial_db_path, "SELECT f.id, f.amount FROM fines f JOIN loans l ON l.id = f.loan_id JOIN copies c ON c.id = l.copy_id "
                                     "JOIN titles t ON t.id = c.title_id WHERE f.member_id = 1 AND f.status = 'unpaid' "
                                     "AND f.reason = 'overdue' AND t.title = 'Salt and Cedar'")
    if len(target) != 1:
        return {"result": "others"}
    fine_id, amount = target[0]
    after = _query(final_db_path, "SELECT status FROM fines WHERE id = ?", (fine_id,))
    if len(after) != 1 or after[0][0] != "paid":
        return {"result": "others"}
    initial_payment_ids = {r[0] for r in _query(initial_db_path, "SELECT id FROM fine_payments")}
    new_payments = [r for r in _query(final_db_path, "SELECT id, fine_id, member_id, amount, method FROM fine_payments ORDER BY id")
                    if r[0] not in initial_payment_ids]
    if len(new_payments) != 1:
        return {"result": "others"}
    _pid, p_fine, p_member, p_amount, p_method = new_payments[0]
    if p_fine != fine_id or p_member != 1 or abs(p_amount - amount) > 0.005 or p_method != "card":
        return {"result": "others"}
    others_before = _query(initial_db_path, "SELECT id, status FROM fines WHERE id != ? ORDER BY id", (fine_id,))
    others_after = _query(final_db_path, "SELECT id, status FROM fines WHERE id != ? ORDER BY id", (fine_id,))
    if others_before != others_after:
        return {"result": "others"}
    return {"result": "complete"}
