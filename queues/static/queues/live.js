/* Pages that refresh themselves (queues/board/live.py): plain JavaScript, no build step, no dependency.
 *
 * A page that refreshes has a #live-bar with data-live-url (what to poll) and data-refresh-seconds, and
 * regions marked data-live="<name>". Every few seconds this fetches the URL:
 * - JSON (a job list's ?format=json): its "html" holds each region's new content, rendered by the page's
 *   own templates;
 * - HTML (the home and queue pages poll themselves): each region is cut from the page.
 * It keeps the boxes the operator checked (by value), fires "queues:live" on the document (job_list.js
 * redraws its counter), pauses while the tab is hidden (document.hidden) and whenever the operator turns
 * it off: the "Live: on/off" button, remembered in localStorage ("queues.live"), for every page.
 * window.queuesLive.polls counts the polls started (tests/browser/test_live_lists.py reads it).
 */
"use strict";
(function () {
    const STORE = "queues.live";
    let bar = null;
    let timer = null;
    let busy = false;
    const live = (window.queuesLive = {polls: 0});

    function wanted() {
        try {
            return window.localStorage.getItem(STORE) !== "off";
        } catch (error) {
            return true; // storage refused (private mode): on, as by default
        }
    }

    function remember(on) {
        try {
            window.localStorage.setItem(STORE, on ? "on" : "off");
        } catch (error) {
            // nothing to remember it in: this page still follows the button
        }
    }

    function status(text) {
        const element = document.getElementById("live-status");
        if (element) {
            element.textContent = text;
        }
    }

    function drawToggle() {
        const button = document.getElementById("live-toggle");
        const on = wanted();
        button.textContent = on ? "Live: on" : "Live: off";
        button.setAttribute("aria-pressed", on ? "true" : "false");
        bar.classList.toggle("live-off", !on);
    }

    function schedule() {
        window.clearTimeout(timer);
        timer = null;
        if (wanted() && !document.hidden) {
            timer = window.setTimeout(poll, Number(bar.dataset.refreshSeconds) * 1000);
        }
    }

    function checkedValues() {
        return new Set(
            Array.from(document.querySelectorAll("input.action-select:checked")).map(function (box) {
                return box.value;
            })
        );
    }

    function swap(parts) {
        const kept = checkedValues();
        document.querySelectorAll("[data-live]").forEach(function (region) {
            const html = parts(region.dataset.live);
            if (typeof html === "string") {
                region.innerHTML = html;
            }
        });
        document.querySelectorAll("input.action-select").forEach(function (box) {
            box.checked = kept.has(box.value);
        });
        document.dispatchEvent(new CustomEvent("queues:live"));
    }

    function apply(response, body) {
        const type = response.headers.get("Content-Type") || "";
        if (type.indexOf("application/json") === 0) {
            const data = JSON.parse(body);
            swap(function (name) { return (data.html || {})[name]; });
            return;
        }
        const page = new DOMParser().parseFromString(body, "text/html");
        swap(function (name) {
            const region = page.querySelector('[data-live="' + name + '"]');
            return region ? region.innerHTML : undefined;
        });
    }

    function poll() {
        timer = null;
        if (busy || !wanted() || document.hidden) {
            return;
        }
        busy = true;
        live.polls += 1;
        fetch(bar.dataset.liveUrl, {
            credentials: "same-origin",
            cache: "no-store",
            headers: {"Accept": "application/json, text/html", "X-Requested-With": "live.js"},
        })
            .then(function (response) {
                return response.text().then(function (body) {
                    if (!response.ok) {
                        status("not refreshed: the panel answered " + response.status);
                        return;
                    }
                    apply(response, body);
                    status("updated " + new Date().toLocaleTimeString());
                });
            })
            .catch(function () {
                status("not refreshed: the panel cannot be reached");
            })
            .finally(function () {
                busy = false;
                schedule();
            });
    }

    document.addEventListener("DOMContentLoaded", function () {
        bar = document.getElementById("live-bar");
        if (!bar || !Number(bar.dataset.refreshSeconds)) {
            return;
        }
        drawToggle();
        document.getElementById("live-toggle").addEventListener("click", function () {
            remember(!wanted());
            drawToggle();
            status("");
            schedule();
        });
        document.addEventListener("visibilitychange", function () {
            if (document.hidden) {
                window.clearTimeout(timer);
                timer = null;
            } else if (wanted()) {
                poll(); // back in view: the page is brought up to date at once
            }
        });
        schedule();
    });
})();
