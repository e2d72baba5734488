def verify_task(initial_db_path: str, final_db_path: str) -> dict:
    import sqlite3

    def _sprints(path):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            cur = conn.execute("SELECT p.name AS project, s.name, s.status, s.start_date, s.end_date, s.goal FROM sprints s "
                               "JOIN projects p ON p.id = s.project_id WHERE s.status = 'active' ORDER BY s.id")
            return [dict(zip([d[0] for d in cur.description], r)) for r in cur.fetchall()]
        finally:
            conn.close()

    return {
        "expected_answer": {"sprint": "Sprint 15 (Mobile App)", "end_date": "2026-03-17", "goal": "Ship offline mode beta to TestFlight"},
        "distractors_note": "Customer Web Portal also has an active 'Sprint 15' ending 2026-03-15",
        "active_sprints_initial": _sprints(initial_db_path),
        "active_sprints_final": _sprints(final_db_path),
    }
