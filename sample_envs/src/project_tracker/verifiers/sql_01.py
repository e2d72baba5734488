def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def _summary(path):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            cur = conn.execute(
                "SELECT i.issue_key, i.title, COUNT(t.id), COALESCE(SUM(t.minutes), 0) FROM issues i "
                "LEFT JOIN time_logs t ON t.issue_id = i.id WHERE i.title LIKE '%session storage to Redis%' "
                "GROUP BY i.id ORDER BY i.id")
            return [{"issue_key": k, "title": t, "entries": n, "total_minutes": m, "total_hours": m / 60.0}
                    for k, t, n, m in cur.fetchall()]
        finally:
            conn.close()

    return {
        "expected_answer": "WEB-4 has 450 minutes logged = 7.5 hours",
        "distractors_note": "PLAT-2 'Migrate session storage to Redis cluster' has 360 minutes (6 hours)",
        "initial": _summary(initial_db_path),
        "final": _summary(final_db_path),
    }
