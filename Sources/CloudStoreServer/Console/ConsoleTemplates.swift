import Mustache

/// The console's pages as Mustache templates, kept in the code (no resource bundle to ship): the
/// server's HTML ``document``, the console's layout in it, and a template per page, each filling
/// the layout's `body` block.
///
/// Every value goes through `{{ }}`, which escapes HTML (`<`, `>`, `&`, `"`, `'`); the templates
/// never use `{{{ }}}`. A page's view is a ``ConsolePage`` whose `page` holds what the page
/// shows. Plain CSS, no JavaScript.
enum ConsoleTemplates {
    /// Every template, parsed once.
    static let library = MustacheLibrary(parsing: templates, of: "console")

    static let templates: [(String, String)] = [
        ("document", document), ("layout", layout), ("sign-in", signIn), ("failure", failure), ("overview", overview),
        ("container", container), ("database", database), ("zone", zone), ("record", record), ("schema", schema),
        ("requests", requests),
    ]

    /// The HTML document every page of the server fills (the sign-in page's too): its `site`,
    /// `style`, `header` and `main` blocks, and the view's `title`.
    static let document = """
        <!DOCTYPE html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>{{title}} · {{$site}}CloudStore{{/site}}</title>
        <style>
        {{$style}}{{/style}}
        </style>
        </head>
        <body>
        {{$header}}{{/header}}
        <main>
        {{$main}}{{/main}}
        </main>
        </body>
        </html>
        """

    static let layout = """
        {{<document}}{{$site}}CloudStore console{{/site}}{{$style}}
        body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #1d1d1f; background: #f5f5f7; }
        header { background: #1d1d1f; color: #fff; padding: .6em 1.5em; display: flex; gap: 1.5em; align-items: center; }
        header a { color: #fff; text-decoration: none; }
        header .brand { font-weight: 600; }
        header form { margin: 0 0 0 auto; }
        main { padding: .5em 1.5em 3em; max-width: 1400px; }
        nav.crumbs { color: #6e6e73; font-size: 90%; margin-top: .8em; }
        nav.crumbs a { color: #0066cc; }
        h1 { font-size: 1.6em; margin: .3em 0 .6em; }
        h2 { font-size: 1.2em; margin: 1.4em 0 .4em; }
        a { color: #0066cc; }
        table { border-collapse: collapse; background: #fff; margin: .4em 0 1.2em; box-shadow: 0 1px 2px rgba(0,0,0,.08); }
        th, td { text-align: left; padding: .35em .8em; border-bottom: 1px solid #e5e5ea; vertical-align: top; }
        th { background: #fafafa; font-weight: 600; }
        td.number { text-align: right; font-variant-numeric: tabular-nums; }
        td.time { white-space: nowrap; }
        code { font-family: ui-monospace, "SF Mono", Menlo, monospace; font-size: 88%; word-break: break-all; }
        .summary { background: #fff; padding: .8em 1em; border-radius: 6px; box-shadow: 0 1px 2px rgba(0,0,0,.08); max-width: 60em; }
        .note { color: #6e6e73; }
        .failure { color: #b00020; }
        .field { margin: 0 0 .2em; }
        .pages a { margin-right: 1.2em; }
        form.sign-in label { display: block; margin: .8em 0 .3em; }
        form.sign-in input[type=password] { width: 28em; max-width: 100%; padding: .3em; }
        button { font: inherit; padding: .25em .9em; }
        {{/style}}{{$header}}<header><a class="brand" href="/console">CloudStore console</a>{{#signedIn}}<a href="/console/operations">Recent operations</a><a href="/console/errors">Recent errors</a><form method="post" action="/console/sign-out"><button type="submit">Sign out</button></form>{{/signedIn}}</header>{{/header}}{{$main}}
        <nav class="crumbs">{{#crumbs}}<a href="{{href}}">{{text}}</a> › {{/crumbs}}</nav>
        <h1>{{title}}</h1>
        {{$body}}{{/body}}
        {{/main}}{{/document}}
        """

    static let signIn = """
        {{<layout}}{{$body}}{{#page}}
        {{#hasMessage}}<p class="failure">{{message}}</p>{{/hasMessage}}
        <form class="sign-in" method="post" action="/console/sign-in">
        <label for="token">Operator token</label>
        <input id="token" type="password" name="token" autocomplete="current-password" autofocus>
        <input type="hidden" name="next" value="{{next}}">
        <button type="submit">Sign in</button>
        </form>
        <p class="note">The console shows every user's data, so only the operator token opens it: the one the server was started with (--operator-token-file or CLOUDSTORE_OPERATOR_TOKEN). A user's token does not.</p>
        {{/page}}{{/body}}{{/layout}}
        """

    static let failure = """
        {{<layout}}{{$body}}{{#page}}
        <p class="failure">{{message}}</p>
        <p><a href="/console">Back to the overview</a></p>
        {{/page}}{{/body}}{{/layout}}
        """

    static let overview = """
        {{<layout}}{{$body}}{{#page}}
        <p class="summary">{{activity}}</p>
        <p>Up {{uptime}}, since {{started}}. <a href="/console/operations">Recent operations</a> ({{requestCount}}) · <a href="/console/errors">Recent errors</a> ({{failureCount}})</p>
        <h2>Containers served</h2>
        <table>
        <tr><th>Container</th><th>Schema</th></tr>
        {{#containers}}<tr><td><a href="{{href}}">{{name}}</a></td><td><a href="{{developmentSchema}}">development</a> · <a href="{{productionSchema}}">production</a></td></tr>
        {{/containers}}
        </table>
        {{#hasReplicas}}<h2>Read replicas</h2>
        <table>
        <tr><th>Replica</th><th>Now</th><th>Reads served</th><th>Behind the primary</th><th>Failed</th></tr>
        {{#replicas}}<tr><td>{{name}}</td><td>{{state}}</td><td class="number">{{served}}</td><td class="number">{{behind}}</td><td class="number">{{failed}}</td></tr>
        {{/replicas}}
        </table>
        <p class="note">Since the server started: reads a replica answered, reads the primary answered because the replica had not caught up, and reads that failed on it (after which it rests for a second or more).</p>{{/hasReplicas}}
        {{/page}}{{/body}}{{/layout}}
        """

    static let container = """
        {{<layout}}{{$body}}{{#page}}
        {{#environments}}
        <h2>{{name}}</h2>
        <p><a href="{{schemaHref}}">Schema of {{name}}</a></p>
        {{#hasDatabases}}<table>
        <tr><th>Database</th><th>User</th><th>Zones</th></tr>
        {{#databases}}<tr><td><a href="{{href}}">{{scope}}</a></td><td>{{owner}}</td><td class="number">{{zones}}</td></tr>
        {{/databases}}
        </table>{{/hasDatabases}}
        {{^hasDatabases}}<p class="note">Nothing is stored in {{name}} yet.</p>{{/hasDatabases}}
        {{/environments}}
        {{/page}}{{/body}}{{/layout}}
        """

    static let database = """
        {{<layout}}{{$body}}{{#page}}
        <p>Database sync token: <code>{{databaseToken}}</code> <span class="note">(what changes/database answers a client that has read every change)</span></p>
        <table>
        <tr><th>Zone</th><th>Records</th><th>Change sequence</th><th>Sync token</th></tr>
        {{#zones}}<tr><td><a href="{{href}}">{{name}}</a></td><td class="number">{{records}}</td><td class="number">{{seq}}</td><td><code>{{token}}</code></td></tr>
        {{/zones}}
        </table>
        <p class="note">A zone's sync token is the one changes/zone answers a client that has read all of the zone.</p>
        {{/page}}{{/body}}{{/layout}}
        """

    static let zone = """
        {{<layout}}{{$body}}{{#page}}
        <p>{{range}}, by record name.</p>
        {{#hasRecords}}<table>
        <tr><th>Record</th><th>Type</th><th>Change tag</th><th>Modified</th><th>Fields</th></tr>
        {{#records}}<tr><td><a href="{{href}}">{{name}}</a></td><td>{{type}}</td><td><code>{{changeTag}}</code></td><td>{{modified}}</td><td>{{#fields}}<p class="field"><b>{{name}}</b>: {{value}}</p>{{/fields}}</td></tr>
        {{/records}}
        </table>{{/hasRecords}}
        <p class="pages">{{#hasFirst}}<a href="{{firstHref}}">First page</a>{{/hasFirst}}{{#hasNext}}<a href="{{nextHref}}">Next page</a>{{/hasNext}}</p>
        {{/page}}{{/body}}{{/layout}}
        """

    static let record = """
        {{<layout}}{{$body}}{{#page}}
        <table>
        <tr><th>Record type</th><td>{{type}}</td></tr>
        <tr><th>Change tag</th><td><code>{{changeTag}}</code></td></tr>
        <tr><th>Created</th><td>{{created}}</td></tr>
        <tr><th>Modified</th><td>{{modified}}</td></tr>
        <tr><th>History of versions</th><td>not kept by this server: it stores each record's latest state only</td></tr>
        </table>
        <h2>Fields</h2>
        {{#hasFields}}<table>
        <tr><th>Field</th><th>Type</th><th>Value</th></tr>
        {{#fields}}<tr><td>{{name}}</td><td>{{type}}</td><td>{{value}}</td></tr>
        {{/fields}}
        </table>{{/hasFields}}
        {{^hasFields}}<p class="note">This record has no fields.</p>{{/hasFields}}
        {{/page}}{{/body}}{{/layout}}
        """

    static let schema = """
        {{<layout}}{{$body}}{{#page}}
        <p>Version {{version}}. <a href="{{otherHref}}">Schema of {{otherEnvironment}}</a></p>
        {{#recordTypes}}<h2>{{name}}</h2>
        <table>
        <tr><th>Field</th><th>Type</th><th>Queryable</th></tr>
        {{#fields}}<tr><td>{{name}}</td><td>{{type}}</td><td>{{queryable}}</td></tr>
        {{/fields}}
        </table>
        {{/recordTypes}}
        {{^hasRecordTypes}}<p class="note">No record types are declared in this environment.</p>{{/hasRecordTypes}}
        {{/page}}{{/body}}{{/layout}}
        """

    static let requests = """
        {{<layout}}{{$body}}{{#page}}
        <p class="note">{{note}}</p>
        {{#hasRequests}}<table>
        <tr><th>Time</th><th>Request</th><th>Container</th><th>Caller</th><th>Status</th><th>Duration</th>{{#showsErrors}}<th>Error</th>{{/showsErrors}}</tr>
        {{#requests}}<tr><td class="time">{{time}}</td><td>{{request}}</td><td>{{container}}</td><td>{{caller}}</td><td>{{status}}</td><td>{{duration}}</td>{{#showsErrors}}<td>{{error}}</td>{{/showsErrors}}</tr>
        {{/requests}}
        </table>{{/hasRequests}}
        {{^hasRequests}}<p>{{empty}}</p>{{/hasRequests}}
        {{/page}}{{/body}}{{/layout}}
        """
}

extension MustacheLibrary {
    /// A library of the server's own templates (name, text); one that does not parse is a
    /// programming error, named with `owner` (`console template sign-in does not parse: …`).
    init(parsing templates: [(String, String)], of owner: String) {
        self.init()
        for (name, text) in templates {
            do {
                try register(text, named: name)
            } catch {
                preconditionFailure("\(owner) template \(name) does not parse: \(error)")
            }
        }
    }
}
