// "Run now": POST a run of the job's DAG to Airflow's REST API with the viewer's session (the
// same rights as the Airflow UI gives them), unpausing the DAG first as Airflow's own trigger
// form does. The run id and the note carry the table, so the DAG's run list (which shows run
// ids, not notes) says what each run touched.
async function icefloeRunNow(button) {
  const {dag, job, table, airflow} = button.dataset;
  const say = (text, failed, href) => {
    const note = document.createElement(href ? "a" : "span");
    note.className = "run-message" + (failed ? " failed" : "");
    note.textContent = text;
    if (href) { note.href = href; note.target = "_top"; }
    button.after(note);
  };
  button.disabled = true;
  const api = airflow + "api/v2/dags/" + encodeURIComponent(dag);
  const send = (url, method, body) => fetch(url, {
    method, credentials: "same-origin",
    headers: {"Content-Type": "application/json", "Accept": "application/json"},
    body: JSON.stringify(body),
  });
  try {
    const dagInfo = await fetch(api, {credentials: "same-origin"});
    if (!dagInfo.ok) throw new Error(dag + ": " + dagInfo.status + " " + (await dagInfo.text()));
    if ((await dagInfo.json()).is_paused) {
      const unpaused = await send(api, "PATCH", {is_paused: false});
      if (!unpaused.ok) throw new Error("cannot unpause " + dag + ": " + unpaused.status);
    }
    const response = await send(api + "/dagRuns", "POST", {
      dag_run_id: "manual__" + table + "__" + new Date().toISOString(),
      logical_date: null, conf: {table}, note: table + " · " + job + " (Iceberg page)",
    });
    const body = await response.json().catch(() => ({}));
    if (!response.ok) throw new Error(response.status + " " + JSON.stringify(body.detail ?? body));
    say("started " + body.dag_run_id, false,
        airflow + "dags/" + encodeURIComponent(dag) + "/runs/" + encodeURIComponent(body.dag_run_id));
  } catch (error) {
    say(String(error.message || error), true);
    button.disabled = false;
  }
}
document.querySelectorAll("button.run-now").forEach(
  (button) => button.addEventListener("click", () => icefloeRunNow(button)));
