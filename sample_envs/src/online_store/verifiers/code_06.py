def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3
    import re

    def rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    def norm(s):
        return re.sub(r"\s+", " ", (s or "").strip().strip("'\"").strip()).rstrip(".").lower()

    product = rows(initial_db_path, "SELECT id FROM products WHERE name = 'Summit Trail Backpack 30L'")
    if len(product) != 1:
        return {"result": "others"}
    pid = product[0][0]
    sql = "SELECT id, rating, title, body FROM reviews WHERE user_id = 1 AND product_id = ?"
    if rows(initial_db_path, sql, (pid,)):
        return {"result": "others"}
    after = rows(final_db_path, sql, (pid,))
    if len(after) != 1:
        return {"result": "others"}
    _, rating, title, body = after[0]
    if rating != 5 or norm(title) != "perfect daypack":
        return {"result": "others"}
    if norm(body) != "comfortable straps and plenty of pockets for a full day hike":
        return {"result": "others"}
    return {"result": "complete"}
