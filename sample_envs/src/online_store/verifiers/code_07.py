def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3
    import re

    def rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    sql = ("SELECT id, label, recipient_name, street, city, state, postal_code, country, is_default "
           "FROM addresses WHERE user_id = 1 ORDER BY id")
    initial_ids = {r[0] for r in rows(initial_db_path, sql)}
    final_rows = rows(final_db_path, sql)
    new_rows = [r for r in final_rows if r[0] not in initial_ids]
    if len(new_rows) != 1:
        return {"result": "others"}
    _, label, recipient, street, city, state, postal, country, is_default = new_rows[0]
    low = lambda s: re.sub(r"\s+", " ", (s or "").strip().lower())
    if low(label) != "cabin" or low(recipient) != "maya thompson":
        return {"result": "others"}
    if not re.fullmatch(r"88 pine ridge (road|rd\.?)", low(street)):
        return {"result": "others"}
    if low(city) != "bend" or low(state) not in ("or", "oregon") or (postal or "").strip() != "97701":
        return {"result": "others"}
    if low(country) not in ("united states", "usa", "us", "united states of america", "u.s.", "u.s.a."):
        return {"result": "others"}
    if is_default != 1:
        return {"result": "others"}
    if [r[0] for r in final_rows if r[8] == 1] != [new_rows[0][0]]:
        return {"result": "others"}
    return {"result": "complete"}
