// The parser of the chat-template interpreter (jinja.h): Jinja2's grammar and operator
// precedence over the lexer's tokens (jinja_lexer.cpp).
#include "serve/jinja_internal.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>

namespace day0::serve::jinja {

namespace {

[[noreturn]] void fail(int line, const std::string& what)
{
    throw TemplateError(fmt::format("chat template line {}: {}", line, what));
}

NodePtr node(NodeKind kind, int line)
{
    auto n = std::make_shared<Node>();
    n->kind = kind;
    n->line = line;
    return n;
}

/// Recursive descent over the tokens, with Jinja2's grammar and operator precedence.
class Parser {
public:
    explicit Parser(std::vector<Token> tokens)
        : m_tokens(std::move(tokens))
    {
    }

    NodePtr parseAll()
    {
        auto body = parseBody({});
        if (peek().kind != Tok::End) {
            fail(peek().line, fmt::format("unexpected {{% {} %}}", m_endWord));
        }
        return body;
    }

private:
    const Token& peek(std::size_t ahead = 0) const
    {
        return m_tokens[std::min(m_index + ahead, m_tokens.size() - 1)];
    }
    Token next() { return m_tokens[std::min(m_index++, m_tokens.size() - 1)]; }
    bool isOp(const char* op, std::size_t ahead = 0) const
    {
        return peek(ahead).kind == Tok::Op && peek(ahead).text == op;
    }
    bool isName(const char* name, std::size_t ahead = 0) const
    {
        return peek(ahead).kind == Tok::Name && peek(ahead).text == name;
    }
    void expectOp(const char* op)
    {
        if (!isOp(op)) {
            fail(peek().line, fmt::format("expected '{}', found '{}'", op, describe(peek())));
        }
        ++m_index;
    }
    void expectBlockEnd()
    {
        if (peek().kind != Tok::BlockEnd) {
            fail(peek().line,
                fmt::format("expected the end of the tag (%}}), found '{}'", describe(peek())));
        }
        ++m_index;
    }
    static std::string describe(const Token& t)
    {
        switch (t.kind) {
        case Tok::String:
            return "'" + t.value.get<std::string>() + "'";
        case Tok::VarEnd:
            return "}}";
        case Tok::BlockEnd:
            return "%}";
        case Tok::End:
            return "the end of the template";
        default:
            return t.text;
        }
    }
    std::string expectName()
    {
        if (peek().kind != Tok::Name) {
            fail(peek().line, fmt::format("expected a name, found '{}'", describe(peek())));
        }
        return next().text;
    }

    /// Statements until a {% word %} in `ends` (left in m_endWord, its tag consumed up to the
    /// word) or the end of the template.
    NodePtr parseBody(const std::vector<std::string>& ends)
    {
        auto body = node(NodeKind::Body, peek().line);
        m_endWord.clear();
        while (peek().kind != Tok::End) {
            const Token& t = peek();
            if (t.kind == Tok::Text) {
                auto n = node(NodeKind::Text, t.line);
                n->text = t.text;
                body->children.push_back(n);
                ++m_index;
            } else if (t.kind == Tok::VarBegin) {
                ++m_index;
                auto n = node(NodeKind::Output, t.line);
                n->children.push_back(parseTuple(true));
                if (peek().kind != Tok::VarEnd) {
                    fail(peek().line, fmt::format("expected }}}}, found '{}'", describe(peek())));
                }
                ++m_index;
                body->children.push_back(n);
            } else if (t.kind == Tok::BlockBegin) {
                const std::string word = peek(1).kind == Tok::Name ? peek(1).text : std::string();
                if (std::find(ends.begin(), ends.end(), word) != ends.end()) {
                    m_index += 2;
                    m_endWord = word;
                    return body;
                }
                ++m_index;
                body->children.push_back(parseStatement());
            } else {
                fail(t.line, fmt::format("unexpected '{}'", describe(t)));
            }
        }
        if (!ends.empty()) {
            fail(peek().line,
                fmt::format("the template ends before {{% {} %}}", fmt::join(ends, " %} or {% ")));
        }
        return body;
    }

    NodePtr parseStatement()
    {
        const int line = peek().line;
        const std::string word = expectName();
        if (word == "if") {
            return parseIf(line);
        }
        if (word == "for") {
            return parseFor(line);
        }
        if (word == "set") {
            return parseSet(line);
        }
        if (word == "break" || word == "continue") {
            expectBlockEnd();
            return node(word == "break" ? NodeKind::Break : NodeKind::Continue, line);
        }
        if (word == "macro") {
            return parseMacro(line);
        }
        if (word == "generation") {
            expectBlockEnd();
            auto n = node(NodeKind::Generation, line);
            n->children.push_back(parseBody({ "endgeneration" }));
            expectBlockEnd();
            return n;
        }
        fail(line,
            fmt::format("{{% {} %}} is not implemented by day0's chat-template interpreter (it "
                        "renders if/for/set/macro/break/continue/generation)",
                word));
    }

    NodePtr parseMacro(int line)
    {
        auto n = node(NodeKind::Macro, line);
        n->text = expectName();
        n->children.push_back(nullptr); // the body, below
        expectOp("(");
        while (!isOp(")")) {
            n->targets.push_back(expectName());
            NodePtr fallback;
            if (isOp("=")) {
                ++m_index;
                fallback = parseExpression();
            }
            n->children.push_back(fallback);
            if (!isOp(",")) {
                break;
            }
            ++m_index;
        }
        expectOp(")");
        expectBlockEnd();
        n->children[0] = parseBody({ "endmacro" });
        expectBlockEnd();
        return n;
    }

    NodePtr parseIf(int line)
    {
        auto n = node(NodeKind::If, line);
        while (true) {
            n->children.push_back(parseTuple(true));
            expectBlockEnd();
            n->children.push_back(parseBody({ "elif", "else", "endif" }));
            if (m_endWord == "elif") {
                continue;
            }
            if (m_endWord == "else") {
                expectBlockEnd();
                n->children.push_back(parseBody({ "endif" }));
            }
            expectBlockEnd();
            return n;
        }
    }

    NodePtr parseFor(int line)
    {
        auto n = node(NodeKind::For, line);
        const bool paren = isOp("(");
        if (paren) {
            ++m_index;
        }
        n->targets.push_back(expectName());
        while (isOp(",")) {
            ++m_index;
            n->targets.push_back(expectName());
        }
        if (paren) {
            expectOp(")");
        }
        if (!isName("in")) {
            fail(peek().line,
                fmt::format("expected 'in' in the for loop, found '{}'", describe(peek())));
        }
        ++m_index;
        n->children.push_back(parseTuple(false));
        NodePtr filter;
        if (isName("if")) {
            ++m_index;
            filter = parseTuple(true);
        }
        if (isName("recursive")) {
            fail(peek().line, "recursive for loops are not implemented");
        }
        expectBlockEnd();
        n->children.push_back(parseBody({ "else", "endfor" }));
        NodePtr elseBody;
        if (m_endWord == "else") {
            expectBlockEnd();
            elseBody = parseBody({ "endfor" });
        }
        expectBlockEnd();
        n->children.push_back(elseBody);
        n->children.push_back(filter);
        return n;
    }

    NodePtr parseSet(int line)
    {
        const std::string target = expectName();
        std::string attr;
        if (isOp(".")) {
            ++m_index;
            attr = expectName();
        }
        if (isOp(",")) {
            fail(line, "{% set a, b = ... %} (unpacking) is not implemented");
        }
        if (peek().kind == Tok::BlockEnd && attr.empty()) {
            ++m_index;
            auto n = node(NodeKind::SetBlock, line);
            n->text = target;
            n->children.push_back(parseBody({ "endset" }));
            expectBlockEnd();
            return n;
        }
        expectOp("=");
        auto n = node(NodeKind::Set, line);
        n->text = target;
        n->attr = attr;
        n->children.push_back(parseTuple(true));
        expectBlockEnd();
        return n;
    }

    /// An expression, or a tuple of them separated by commas (`{{ a, b }}`).
    NodePtr parseTuple(bool withCondition)
    {
        const int line = peek().line;
        auto first = withCondition ? parseExpression() : parseOr();
        if (!isOp(",")) {
            return first;
        }
        auto t = node(NodeKind::Tuple, line);
        t->children.push_back(first);
        while (isOp(",")) {
            ++m_index;
            if (peek().kind == Tok::BlockEnd || peek().kind == Tok::VarEnd || isOp(")")) {
                break;
            }
            t->children.push_back(withCondition ? parseExpression() : parseOr());
        }
        return t;
    }

    NodePtr parseExpression()
    {
        auto expr = parseOr();
        while (isName("if")) {
            auto c = node(NodeKind::Cond, peek().line);
            ++m_index;
            c->children.push_back(expr);
            c->children.push_back(parseOr());
            if (isName("else")) {
                ++m_index;
                c->children.push_back(parseExpression());
            } else {
                c->children.push_back(nullptr);
            }
            expr = c;
        }
        return expr;
    }

    NodePtr parseOr()
    {
        auto left = parseAnd();
        while (isName("or")) {
            auto n = node(NodeKind::Or, next().line);
            n->children = { left, parseAnd() };
            left = n;
        }
        return left;
    }

    NodePtr parseAnd()
    {
        auto left = parseNot();
        while (isName("and")) {
            auto n = node(NodeKind::And, next().line);
            n->children = { left, parseNot() };
            left = n;
        }
        return left;
    }

    NodePtr parseNot()
    {
        if (isName("not")) {
            auto n = node(NodeKind::Not, next().line);
            n->children.push_back(parseNot());
            return n;
        }
        return parseCompare();
    }

    NodePtr binary(const std::string& op, NodePtr left, NodePtr right, int line)
    {
        auto n = node(NodeKind::Binary, line);
        n->text = op;
        n->children = { std::move(left), std::move(right) };
        return n;
    }

    NodePtr parseCompare()
    {
        auto left = parseMath1();
        while (true) {
            const int line = peek().line;
            static constexpr std::array<const char*, 6> kOps = { "==", "!=", "<", "<=", ">", ">=" };
            const auto op
                = std::find_if(kOps.begin(), kOps.end(), [&](const char* o) { return isOp(o); });
            if (op != kOps.end()) {
                ++m_index;
                left = binary(*op, left, parseMath1(), line);
            } else if (isName("in")) {
                ++m_index;
                left = binary("in", left, parseMath1(), line);
            } else if (isName("not") && isName("in", 1)) {
                m_index += 2;
                left = binary("not in", left, parseMath1(), line);
            } else {
                return left;
            }
        }
    }

    NodePtr parseMath1()
    {
        auto left = parseConcat();
        while (isOp("+") || isOp("-")) {
            const Token op = next();
            left = binary(op.text, left, parseConcat(), op.line);
        }
        return left;
    }

    NodePtr parseConcat()
    {
        auto left = parseMath2();
        while (isOp("~")) {
            const Token op = next();
            left = binary("~", left, parseMath2(), op.line);
        }
        return left;
    }

    NodePtr parseMath2()
    {
        auto left = parsePow();
        while (isOp("*") || isOp("/") || isOp("//") || isOp("%")) {
            const Token op = next();
            left = binary(op.text, left, parsePow(), op.line);
        }
        return left;
    }

    NodePtr parsePow()
    {
        auto left = parseUnary(true);
        while (isOp("**")) {
            const Token op = next();
            left = binary("**", left, parseUnary(true), op.line);
        }
        return left;
    }

    NodePtr parseUnary(bool withFilter)
    {
        NodePtr n;
        if (isOp("-") || isOp("+")) {
            const NodeKind kind = isOp("-") ? NodeKind::Neg : NodeKind::Pos;
            n = node(kind, next().line);
            n->children.push_back(parseUnary(false));
        } else {
            n = parsePrimary();
        }
        n = parsePostfix(n);
        return withFilter ? parseFilters(n) : n;
    }

    NodePtr parsePrimary()
    {
        const Token t = next();
        switch (t.kind) {
        case Tok::Name: {
            if (t.text == "true" || t.text == "True" || t.text == "false" || t.text == "False") {
                auto n = node(NodeKind::Literal, t.line);
                n->value = t.text == "true" || t.text == "True";
                return n;
            }
            if (t.text == "none" || t.text == "None") {
                auto n = node(NodeKind::Literal, t.line);
                n->value = nullptr;
                return n;
            }
            auto n = node(NodeKind::Name, t.line);
            n->text = t.text;
            return n;
        }
        case Tok::String: {
            // Adjacent string literals join, as in Python.
            std::string s = t.value.get<std::string>();
            while (peek().kind == Tok::String) {
                s += next().value.get<std::string>();
            }
            auto n = node(NodeKind::Literal, t.line);
            n->value = s;
            return n;
        }
        case Tok::Integer:
        case Tok::Float: {
            auto n = node(NodeKind::Literal, t.line);
            n->value = t.value;
            return n;
        }
        case Tok::Op:
            if (t.text == "(") {
                if (isOp(")")) {
                    ++m_index;
                    return node(NodeKind::Tuple, t.line);
                }
                auto inner = parseTuple(true);
                expectOp(")");
                return inner;
            }
            if (t.text == "[") {
                auto n = node(NodeKind::List, t.line);
                while (!isOp("]")) {
                    n->children.push_back(parseExpression());
                    if (!isOp(",")) {
                        break;
                    }
                    ++m_index;
                }
                expectOp("]");
                return n;
            }
            if (t.text == "{") {
                auto n = node(NodeKind::Dict, t.line);
                while (!isOp("}")) {
                    n->children.push_back(parseExpression());
                    expectOp(":");
                    n->children.push_back(parseExpression());
                    if (!isOp(",")) {
                        break;
                    }
                    ++m_index;
                }
                expectOp("}");
                return n;
            }
            break;
        default:
            break;
        }
        fail(t.line, fmt::format("unexpected '{}' in an expression", describe(t)));
    }

    void parseArgs(Node& n)
    {
        expectOp("(");
        while (!isOp(")")) {
            if (isOp("*") || isOp("**")) {
                fail(peek().line, "*args and **kwargs in calls are not implemented");
            }
            if (peek().kind == Tok::Name && isOp("=", 1)) {
                const std::string key = next().text;
                ++m_index;
                n.kwargs.emplace_back(key, parseExpression());
            } else {
                n.children.push_back(parseExpression());
            }
            if (!isOp(",")) {
                break;
            }
            ++m_index;
        }
        expectOp(")");
    }

    NodePtr parseSubscript(NodePtr object, int line)
    {
        // [key] or [start:stop:step]
        std::array<NodePtr, 3> parts {};
        int part = 0;
        bool slice = false;
        while (!isOp("]")) {
            if (isOp(":")) {
                ++m_index;
                slice = true;
                if (++part > 2) {
                    fail(line, "a slice has at most three parts");
                }
                continue;
            }
            parts[std::size_t(part)] = parseExpression();
        }
        expectOp("]");
        if (!slice) {
            if (!parts[0]) {
                fail(line, "an empty subscript []");
            }
            auto n = node(NodeKind::Item, line);
            n->children = { std::move(object), parts[0] };
            return n;
        }
        auto n = node(NodeKind::Slice, line);
        n->children = { std::move(object), parts[0], parts[1], parts[2] };
        return n;
    }

    NodePtr parsePostfix(NodePtr n)
    {
        while (true) {
            const int line = peek().line;
            if (isOp(".")) {
                ++m_index;
                if (peek().kind == Tok::Integer) {
                    auto item = node(NodeKind::Item, line);
                    auto key = node(NodeKind::Literal, line);
                    key->value = next().value;
                    item->children = { n, key };
                    n = item;
                    continue;
                }
                auto a = node(NodeKind::Attr, line);
                a->text = expectName();
                a->children.push_back(n);
                n = a;
            } else if (isOp("[")) {
                ++m_index;
                n = parseSubscript(n, line);
            } else if (isOp("(")) {
                auto c = node(NodeKind::Call, line);
                c->children.push_back(n);
                parseArgs(*c);
                n = c;
            } else {
                return n;
            }
        }
    }

    NodePtr parseFilters(NodePtr n)
    {
        while (true) {
            const int line = peek().line;
            if (isOp("|")) {
                ++m_index;
                auto f = node(NodeKind::Filter, line);
                f->text = expectName();
                f->children.push_back(n);
                if (isOp("(")) {
                    parseArgs(*f);
                }
                n = f;
            } else if (isName("is")) {
                ++m_index;
                auto t = node(NodeKind::Test, line);
                if (isName("not")) {
                    ++m_index;
                    t->negated = true;
                }
                t->text = expectName();
                t->children.push_back(n);
                if (isOp("(")) {
                    parseArgs(*t);
                } else if (peek().kind == Tok::String || peek().kind == Tok::Integer
                    || peek().kind == Tok::Float
                    || (peek().kind == Tok::Name && !isName("else") && !isName("or")
                        && !isName("and") && !isName("if") && !isName("in") && !isName("not")
                        && !isName("is"))) {
                    // `x is divisibleby 3`, `x is sameas none`: one argument without parentheses.
                    t->children.push_back(parsePostfix(parsePrimary()));
                }
                n = t;
            } else if (isOp("(")) {
                auto c = node(NodeKind::Call, line);
                c->children.push_back(n);
                parseArgs(*c);
                n = c;
            } else {
                return n;
            }
        }
    }

    std::vector<Token> m_tokens;
    std::size_t m_index = 0;
    std::string m_endWord;
};

} // namespace

NodePtr parseTemplate(std::string_view source)
{
    // Jinja normalises newlines and, without keep_trailing_newline, drops one at the very end.
    std::string src;
    src.reserve(source.size());
    for (std::size_t i = 0; i < source.size(); ++i) {
        if (source[i] == '\r') {
            src += '\n';
            if (i + 1 < source.size() && source[i + 1] == '\n') {
                ++i;
            }
        } else {
            src += source[i];
        }
    }
    if (!src.empty() && src.back() == '\n') {
        src.pop_back();
    }
    return Parser(lexTemplate(std::move(src))).parseAll();
}

} // namespace day0::serve::jinja
