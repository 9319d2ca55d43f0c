// Injected into a copy of the Snakemake report by tests/test_report_workflow.py and run by headless
// Chromium (--dump-dom): walks the report's own React app the way a reader does (each category, each
// result's info panel with its caption, each figure and table in the main pane) and appends what it
// found as JSON in a pre element with id "attnrepro-check".
(async function () {
  const tick = () => new Promise((resolve) => setTimeout(resolve, 200));
  const nav = () => document.querySelector("nav").innerText;
  const out = { error: null, loadingHidden: false, navbar: "", categories: {}, results: {} };
  try {
    await tick();
    out.loadingHidden = getComputedStyle(document.querySelector("#loading-screen")).display === "none";
    out.navbar = nav();
    for (const [category, subcategories] of Object.entries(categories)) {
      for (const subcategory of Object.keys(subcategories)) {
        app.setView({ navbarMode: "menu" }); // back to the menu first, as the breadcrumbs do
        await tick();
        app.setView({ navbarMode: "subcategory", category: category, subcategory: subcategory });
        await tick();
        out.categories[`${category} / ${subcategory}`] = nav();
      }
    }
    for (const [path, result] of Object.entries(results)) {
      const record = { mime: result.mime_type, labels: result.labels };
      app.showResultInfo(path);
      await tick();
      record.info = nav();
      if (result.mime_type.startsWith("image/")) {
        app.setView({ content: "img", contentPath: result.data_uri, resultPath: path });
        await tick();
        const img = [...document.querySelectorAll("#app img")].find((i) => i.getAttribute("src") === result.data_uri);
        for (let i = 0; img && !(img.complete && img.naturalWidth > 0) && i < 50; i++) {
          await tick();  // img.decode() never settles under --virtual-time-budget; poll instead
        }
        if (img) {
          record.complete = img.complete;
          record.naturalWidth = img.naturalWidth;
          record.naturalHeight = img.naturalHeight;
          record.shownWidth = img.getBoundingClientRect().width;
        }
      } else if (result.mime_type === "text/html") {
        app.setView({ content: "html", contentPath: result.data_uri, resultPath: path });
        await tick();
        const frame = [...document.querySelectorAll("#app iframe")].find((f) => f.getAttribute("src") === result.data_uri);
        record.iframeHeight = frame ? frame.getBoundingClientRect().height : 0;
      }
      out.results[path] = record;
    }
  } catch (err) {
    out.error = String((err && err.stack) || err);
  }
  const pre = document.createElement("pre");
  pre.id = "attnrepro-check";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
