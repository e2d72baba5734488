def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3
    import re

    def _query(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        rows = conn.execute(sql, params).fetchall()
        conn.close()
        return rows

    total = _query(initial_db_path, "SELECT COALESCE(SUM(amount), 0) FROM fines WHERE member_id = 1 AND status = 'unpaid'")[0][0]
    fines_before = _query(initial_db_path, "SELECT id, amount, status, paid_at FROM fines ORDER BY id")
    fines_after = _query(final_db_path, "SELECT id, amount, status, paid_at FROM fines ORDER BY id")
    payments_before = _query(initial_db_path, "SELECT COUNT(*) FROM fine_payments")[0][0]
    payments_after = _query(final_db_path, "SELECT COUNT(*) FROM fine_payments")[0][0]
    if fines_before != fines_after or payments_before != payments_after:
        return {"result": "others"}
    answer = (final_answer or "").replace(",", "")
    numbers = []
    for m in re.finditer(r"(?<![\d.])(\d+(?:\.\d+)?)(?![\d])", answer):
        numbers.append(float(m.group(1)))
    if any(abs(n - total) < 0.005 for n in numbers):
        return {"result": "complete"}
    return {"result": "others"}
