import Crypto
import Foundation
import Mustache

/// The sign-in page's HTML as Mustache templates, kept in the code as the console's are
/// (``ConsoleTemplates``): the server's HTML document, a layout in it, and a template per page. Every value goes through `{{ }}`,
/// which escapes HTML; the templates never use `{{{ }}}`. The one script, on the token page, is
/// fixed text that the page's `Content-Security-Policy` admits by its hash; every other page runs
/// none.
enum SignInTemplates {
    /// Every template, parsed once.
    static let library = MustacheLibrary(parsing: templates, of: "sign-in")

    static let templates: [(String, String)] = [
        ("document", ConsoleTemplates.document), ("layout", layout), ("form", form), ("token", token), ("refusal", refusal),
    ]

    /// Hands the token to the window that opened the page, if any, at each allowed origin: the
    /// browser delivers a message only to an opener at the origin it names, so no other site's
    /// window receives the token. The message carries it as `ckSession`, the key CloudKit JS
    /// reads, and as `ckWebAuthToken`, the name the token has everywhere else.
    static let script = """
        (function () {
          if (!window.opener) return;
          var token = document.getElementById("token").textContent;
          var message = {ckSession: token, ckWebAuthToken: token};
          var origins = document.querySelectorAll("#origins li");
          for (var i = 0; i < origins.length; i++) {
            try { window.opener.postMessage(message, origins[i].textContent); } catch (e) {}
          }
        })();
        """

    /// The `script-src` source of ``script``: its SHA-256 in base64.
    static let scriptSource = "'sha256-\(Data(SHA256.hash(data: Data(script.utf8))).base64EncodedString())'"

    static let layout = """
        {{<document}}{{$style}}
        body { font: 16px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #1d1d1f; background: #f5f5f7; }
        main { max-width: 26em; margin: 3em auto; background: #fff; padding: 1.5em 2em 2em; border-radius: 10px; box-shadow: 0 1px 3px rgba(0,0,0,.1); }
        h1 { font-size: 1.5em; margin: 0 0 .6em; }
        label { display: block; margin: .9em 0 .3em; font-weight: 600; }
        input[type=text], input[type=password] { box-sizing: border-box; width: 100%; padding: .45em; font: inherit; }
        button { margin-top: 1.2em; font: inherit; padding: .4em 1.4em; }
        code { display: block; font-family: ui-monospace, "SF Mono", Menlo, monospace; font-size: 85%; word-break: break-all; background: #f5f5f7; padding: .6em; }
        .note { color: #6e6e73; font-size: 92%; }
        .failure { color: #b00020; }
        {{/style}}{{$main}}
        <h1>{{title}}</h1>
        {{$body}}{{/body}}
        {{/main}}{{/document}}
        """

    static let form = """
        {{<layout}}{{$body}}{{#page}}
        <p>Sign in to use <b>{{container}}</b> ({{environment}}).{{#hasReturnOrigin}} You will return to {{returnOrigin}}.{{/hasReturnOrigin}}</p>
        {{#hasMessage}}<p class="failure" role="alert">{{message}}</p>{{/hasMessage}}
        <form method="post" action="{{action}}">
        <label for="login">Login</label>
        <input id="login" type="text" name="login" value="{{login}}" autocomplete="username" autocapitalize="none" required autofocus>
        <label for="password">Password</label>
        <input id="password" type="password" name="password" autocomplete="current-password" required>
        <input type="hidden" name="csrf" value="{{csrf}}">
        <input type="hidden" name="redirect" value="{{redirect}}">
        <button type="submit">Sign in</button>
        </form>
        {{/page}}{{/body}}{{/layout}}
        """

    static let token = """
        {{<layout}}{{$body}}{{#page}}
        <p>You are signed in to {{container}} as {{user}}. Your app needs this web auth token, which lasts until {{expires}}:</p>
        <code id="token">{{token}}</code>
        <p class="note">An app that opened this page in a window of its own receives the token by itself; otherwise copy it into the app.</p>
        <ul id="origins" hidden>{{#origins}}<li>{{origin}}</li>{{/origins}}</ul>
        <script>\(script)</script>
        {{/page}}{{/body}}{{/layout}}
        """

    static let refusal = """
        {{<layout}}{{$body}}{{#page}}
        <p class="failure">{{message}}</p>
        {{/page}}{{/body}}{{/layout}}
        """
}
