import ArgumentParser
import CloudStoreServer
import Foundation

/// `cloudstore hash-password --user NAME --login LOGIN`: reads a password (the first line of
/// standard input, or of `--password-file`) and prints the entry of the sign-in users file
/// (`SignInUsers.User` of `CloudStoreServer`) that lets that person sign in as that user, the
/// password kept only as a PBKDF2-HMAC-SHA256 hash with a salt of its own.
///
/// ```sh
/// $ printf '%s\n' 'correct horse battery staple' | cloudstore hash-password --user _alice --login alice
/// {"login":"alice","password":{"algorithm":"PBKDF2-HMAC-SHA256","hash":"…","iterations":600000,"salt":"…"},"userRecordName":"_alice"}
/// ```
public struct HashPasswordCommand: CloudStoreSubcommand {
    /// The command's name, abstract and help.
    public static let configuration = CommandConfiguration(
        commandName: "hash-password",
        abstract: "Print a sign-in users file entry for a login and a password read from standard input.",
        discussion: """
            Reads the password from the first line of standard input (or of --password-file), never \
            from the command line, and prints one line of JSON: the entry to add to "users" in the \
            file of cloudstore serve --sign-in-users. The file keeps a salted PBKDF2-HMAC-SHA256 hash, \
            never the password. Send the server SIGHUP to reload the file.

            Example:
              printf '%s\\n' 'correct horse battery staple' | cloudstore hash-password --user _alice --login alice
            """)

    @Option(help: ArgumentHelp("The userRecordName the person acts as (a user of the tokens file, or a new one).", valueName: "name"))
    var user: String

    @Option(help: ArgumentHelp("What the person types as their login on the sign-in page.", valueName: "login"))
    var login: String

    @Option(help: "A file whose first line is the password, instead of standard input.")
    var passwordFile: String?

    @Option(help: "PBKDF2 iterations (default 600000); more make every guess, and every sign-in, slower.")
    var iterations = SignInUsers.PasswordHash.defaultIterations

    /// `--debug`, which this command does not use beyond its own errors.
    @OptionGroup public var global: GlobalOptions

    /// The command with no options given (ArgumentParser fills them).
    public init() {}

    /// Refuses a user name the server keeps for others, an empty login, iterations out of range.
    public func validate() throws {
        if let problem = ServerConfiguration.usersProblem(["-": user]) { throw ValidationError(problem) }
        guard !login.isEmpty, login.utf8.count <= 255 else { throw ValidationError("--login must be 1 to 255 characters") }
        let range = SignInUsers.PasswordHash.iterationRange
        guard range.contains(iterations) else {
            throw ValidationError("--iterations must be \(range.lowerBound) to \(range.upperBound); it is \(iterations)")
        }
    }

    /// Reads the password, hashes it and prints the entry.
    public func run(in context: CommandContext) async throws {
        let (passwordFile, iterations) = (passwordFile, iterations)
        // Reading a terminal and hashing (a fraction of a second of CPU) block: off the cooperative threads.
        let hash = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<SignInUsers.PasswordHash, any Error>) in
            DispatchQueue.global().async {
                continuation.resume(
                    with: Result {
                        try SignInUsers.PasswordHash(password: try Self.password(from: passwordFile), iterations: iterations)
                    })
            }
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let entry = SignInUsers.User(userRecordName: user, login: login, password: hash)
        context.output.print(String(decoding: try encoder.encode(entry), as: UTF8.self))
    }

    /// The first line of the file, or of standard input, without its line end.
    private static func password(from file: String?) throws -> String {
        let line: Substring
        if let file {
            let url = try InputFile.existing(file, missing: "no password file at \(file): check the path", kind: "a file holding the password")
            line = try String(contentsOf: url, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false).first ?? ""
        } else {
            line = readLine(strippingNewline: true)?[...] ?? ""
        }
        let password = String(line.hasSuffix("\r") ? line.dropLast() : line)
        guard !password.isEmpty else {
            throw CommandError(
                "no password: write it as the first line of \(file ?? "standard input") (printf '%s\\n' 'the password' | cloudstore hash-password …)")
        }
        return password
    }
}
