def verify_task_completion(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3
    import re

    def rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    sql = ("SELECT r.id, r.rating FROM reviews r JOIN products p ON p.id = r.product_id "
           "WHERE p.name = 'Aurora Wireless Headphones' ORDER BY r.id")
    before = rows(initial_db_path, sql)
    after = rows(final_db_path, sql)
    if not before or before != after:
        return {"result": "others"}
    count = len(before)
    average = sum(r[1] for r in before) / count
    text = (final_answer or "").lower()
    rating_hits = [m for m in re.findall(r"\d+\.\d+", text) if abs(float(m) - average) < 0.051]
    if not rating_hits:
        return {"result": "others"}
    rest = re.sub(r"\d+\.\d+", " ", text)
    words = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}
    if not (re.search(r"\b" + str(count) + r"\b", rest) or re.search(r"\b" + words.get(count, "#") + r"\b", rest)):
        return {"result": "others"}
    return {"result": "complete"}
