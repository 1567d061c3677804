// Plotly draws WebGL traces (scattergl: the Compare page's points, big ceiling charts) only
// where it can set up WebGL; elsewhere (no GPU, a remote desktop, a headless browser,
// hardware acceleration off) it shows "WebGL is not supported" in place of the chart. Having
// a WebGL context is not enough to know (a software renderer can hand one out and still fail
// plotly), so the probe asks plotly itself, once per page: it draws one tiny scattergl chart
// off screen. Where that fails, the traces are drawn as SVG: slower with many points, but a
// chart.
(function () {
    let probe = null;

    function plotlyLoaded() {
        return new Promise(function (resolve) {
            let waited = 0;
            (function check() {
                if (window.Plotly || waited >= 5000) { resolve(window.Plotly); return; }
                waited += 50;
                setTimeout(check, 50);
            })();
        });
    }

    async function webglWorks() {
        const Plotly = await plotlyLoaded();
        if (!Plotly) { return true; }  // nothing to ask: leave the figure as it is
        const div = document.createElement("div");
        div.style.cssText = "position:absolute;left:-10000px;top:0;width:40px;height:40px";
        document.body.appendChild(div);
        try {
            await Plotly.newPlot(div, [{type: "scattergl", x: [1, 2], y: [1, 2]}],
                                 {width: 40, height: 40}, {staticPlot: true});
            return !div.querySelector(".no-webgl");
        } catch (e) {
            return false;
        } finally {
            try { Plotly.purge(div); } catch (e) { /* already gone */ }
            div.remove();
        }
    }

    window.dash_clientside = Object.assign({}, window.dash_clientside, {
        scalewatch: {
            svgWithoutWebgl: async function (figure) {
                const noUpdate = window.dash_clientside.no_update;
                const gl = figure && figure.data
                    && figure.data.some(function (t) { return t.type === "scattergl"; });
                if (!gl) { return noUpdate; }
                if (probe === null) { probe = webglWorks(); }
                if (await probe) { return noUpdate; }
                const data = figure.data.map(function (t) {
                    return t.type === "scattergl" ? Object.assign({}, t, {type: "scatter"}) : t;
                });
                return Object.assign({}, figure, {data: data});
            },
        },
    });
})();
