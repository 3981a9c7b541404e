/// `POST /{db}/users/discover` (`{"lookupInfos": [...]}`) and `POST /{db}/users/lookup/id`,
/// `/email` or `/phone` (`{"users": [...]}`): the identities of users named by lookup info.
///
/// The server answers only for users it knows by their record name (those its tokens file maps a
/// token to); it holds no e-mail addresses or phone numbers, so lookups by those find no one, and
/// nothing is said about anyone else. An unknown user is left out of the answer.
///
/// ```json
/// {"lookupInfos": [{"userRecordName": "_bob"}, {"emailAddress": "carol@example.com"}]}
/// → {"users": [{"userRecordName": "_bob", "lookupInfo": {"userRecordName": "_bob"}}]}
/// ```
public struct UsersLookupRequest: Hashable, Sendable, Codable {
    /// Who to look up; `lookupInfos` on the wire for `users/discover`, `users` for `users/lookup/*`.
    public var lookupInfos: [ShareParticipant.LookupInfo]

    public init(lookupInfos: [ShareParticipant.LookupInfo]) {
        self.lookupInfos = lookupInfos
    }

    enum CodingKeys: String, CodingKey {
        case lookupInfos, users
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        guard
            let infos = try container.decodeIfPresent([ShareParticipant.LookupInfo].self, forKey: .lookupInfos)
                ?? container.decodeIfPresent([ShareParticipant.LookupInfo].self, forKey: .users)
        else {
            throw DecodingError.keyNotFound(
                CodingKeys.lookupInfos,
                .init(codingPath: decoder.codingPath, debugDescription: "send the users to look up as lookupInfos (or users)"))
        }
        lookupInfos = infos
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(lookupInfos, forKey: .lookupInfos)
    }
}

/// The users a lookup found.
public struct UsersResponse: Hashable, Sendable, Codable {
    public var users: [ShareParticipant.UserIdentity]

    public init(users: [ShareParticipant.UserIdentity]) {
        self.users = users
    }
}
