def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def _rows(path, sql, params=()):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        rows = [dict(r) for r in conn.execute(sql, params).fetchall()]
        conn.close()
        return rows

    lists_sql = "SELECT id, member_id, name, description, is_public FROM reading_lists ORDER BY id"
    items_sql = ("SELECT i.id, i.reading_list_id, i.title_id, t.title, t.format, i.note FROM reading_list_items i "
                 "JOIN titles t ON t.id = i.title_id ORDER BY i.id")
    lists_before = _rows(initial_db_path, lists_sql)
    lists_after = _rows(final_db_path, lists_sql)
    items_after = _rows(final_db_path, items_sql)
    target_ids = [l["id"] for l in lists_after if l["member_id"] == 1 and l["name"].strip().lower() == "summer mysteries 2026"]
    return {
        "task": "create private list 'Summer Mysteries 2026' for user 1 with print 'The Silent Orchard' and 'Midnight at Fenwick Hall'",
        "candidate_titles": _rows(initial_db_path, "SELECT id, title, format FROM titles WHERE title IN ('The Silent Orchard', 'Midnight at Fenwick Hall') ORDER BY id"),
        "reading_lists_initial": lists_before,
        "reading_lists_final": lists_after,
        "user1_target_lists_final": [l for l in lists_after if l["id"] in target_ids],
        "items_in_target_lists": [i for i in items_after if i["reading_list_id"] in target_ids],
        "items_initial": _rows(initial_db_path, items_sql),
    }
