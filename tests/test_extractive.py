"""The extractive answerer over realistic MkDocs documentation passages."""

from __future__ import annotations

import pytest
from anchored_query.citations import verify
from anchored_query.extractive import (
    BLENDED_MIN_SCORE,
    DEFAULT_MIN_SCORE,
    MAX_EMBEDDED,
    ExtractiveResult,
    answer_extractively,
    choose_threshold,
)
from anchored_query.types import Passage

from build_index.embedder import DEFAULT_MODEL, Embedder, get_model
from build_index.tokenizer import tokenize

# (page, anchor, title, heading path, text): MkDocs-style documentation sections.
CORPUS: list[tuple[str, str, str, list[str], str]] = [
    (
        "getting-started/",
        "installation",
        "Getting Started",
        ["Getting Started", "Installation"],
        "To install MkDocs, run the following command from the command line:\n"
        "pip install mkdocs\n"
        "MkDocs requires a recent version of Python and the Python package manager, pip, "
        "to be installed on your system.",
    ),
    (
        "getting-started/",
        "creating-a-new-project",
        "Getting Started",
        ["Getting Started", "Creating a new project"],
        "Getting started is super easy. To create a new project, run the following command "
        "from the command line:\nmkdocs new my-project\ncd my-project\n"
        "There's a single configuration file named mkdocs.yml, and a folder named docs that "
        "will contain your documentation source files.",
    ),
    (
        "getting-started/",
        "the-dev-server",
        "Getting Started",
        ["Getting Started", "The dev-server"],
        "MkDocs comes with a built-in dev-server that lets you preview your documentation as "
        "you work on it. Make sure you're in the same directory as the mkdocs.yml "
        "configuration file, and then start the server by running the mkdocs serve command. "
        "Open up http://127.0.0.1:8000/ in your browser, and you'll see the default home page "
        "being displayed. The dev-server also supports auto-reloading, and will rebuild your "
        "documentation whenever anything in the configuration file, documentation directory, "
        "or theme directory changes.",
    ),
    (
        "getting-started/",
        "building-the-site",
        "Getting Started",
        ["Getting Started", "Building the site"],
        "When you're finished editing, you can build a static site from your Markdown files "
        "with the mkdocs build command. This will create a new directory, named site. "
        "Stale files are removed when the site is rebuilt.",
    ),
    (
        "user-guide/configuration/",
        "site_name",
        "Configuration",
        ["Configuration", "Project information", "site_name"],
        "This is a required setting, and should be a string that is used as the main title "
        "for the project documentation. When rendering the theme this setting will be passed "
        "as the site_name context variable.",
    ),
    (
        "user-guide/configuration/",
        "site_url",
        "Configuration",
        ["Configuration", "Project information", "site_url"],
        "Set the canonical URL of the site. This will add a link tag with the canonical URL "
        "to the head section of each HTML page. If the 'root' of the MkDocs site will be "
        "within a subdirectory of a domain, be sure to include that subdirectory in the "
        "setting. The default is null.",
    ),
    (
        "user-guide/configuration/",
        "dev_addr",
        "Configuration",
        ["Configuration", "Build directories", "dev_addr"],
        "Determines the address used when running mkdocs serve. Must be of the format "
        "IP:PORT. Allows a custom default to be set without the need to pass it through the "
        "--dev-addr option every time the mkdocs serve command is called. "
        "The default value is 127.0.0.1:8000, so the dev server listens on port 8000.",
    ),
    (
        "user-guide/configuration/",
        "use_directory_urls",
        "Configuration",
        ["Configuration", "Build directories", "use_directory_urls"],
        "This setting controls the style used for linking to pages within the documentation. "
        "When use_directory_urls is true, a page source file about.md is written to "
        "about/index.html and linked as about/. Set it to false when the site is viewed "
        "from the local file system. The default is true.",
    ),
    (
        "user-guide/configuration/",
        "docs_dir",
        "Configuration",
        ["Configuration", "Build directories", "docs_dir"],
        "The directory containing the documentation source markdown files. This can either "
        "be a relative directory, in which case it is resolved relative to the directory "
        "containing your configuration file, or it can be an absolute directory path. "
        "The default is docs.",
    ),
    (
        "user-guide/configuration/",
        "site_dir",
        "Configuration",
        ["Configuration", "Build directories", "site_dir"],
        "The directory where the output HTML and other files are created. The default is "
        "site. If you are using source code control you will normally want to ensure that "
        "your build output files are not committed into the repository.",
    ),
    (
        "user-guide/configuration/",
        "nav",
        "Configuration",
        ["Configuration", "Documentation layout", "nav"],
        "This setting is used to determine the format and layout of the global navigation "
        "for the site. If no nav setting is provided, the pages are sorted alphanumerically "
        "by file name. Navigation items may also include links to external sites.",
    ),
    (
        "user-guide/configuration/",
        "strict",
        "Configuration",
        ["Configuration", "Build directories", "strict"],
        "Determines whether to treat warnings as errors. When strict mode is enabled, "
        "MkDocs aborts the build when a link points to a missing page. The default is false. "
        "The --strict flag of mkdocs build enables it from the command line.",
    ),
    (
        "user-guide/configuration/",
        "markdown_extensions",
        "Configuration",
        ["Configuration", "Formatting options", "markdown_extensions"],
        "MkDocs uses the Python Markdown library to translate Markdown files into HTML. "
        "Python Markdown supports a variety of extensions that customize how pages are "
        "formatted. The markdown_extensions setting lets you enable extensions such as toc "
        "and tables.",
    ),
    (
        "user-guide/configuration/",
        "search",
        "Configuration",
        ["Configuration", "Plugins", "search"],
        "A search plugin is provided by default with MkDocs which uses lunr.js as a search "
        "engine. The lang option sets the language used for building the search index; "
        "lunr languages such as ja and zh are supported. The separator option defines the "
        "word separator used when building the index.",
    ),
    (
        "user-guide/deploying-your-docs/",
        "github-pages",
        "Deploying your docs",
        ["Deploying your docs", "GitHub Pages"],
        "If you host the source code for a project on GitHub, you can easily use GitHub "
        "Pages to host the documentation for your project. Run mkdocs gh-deploy and MkDocs "
        "will build your docs and use the ghp-import tool to commit them to the gh-pages "
        "branch and push the gh-pages branch to GitHub.",
    ),
    (
        "user-guide/deploying-your-docs/",
        "other-providers",
        "Deploying your docs",
        ["Deploying your docs", "Other providers"],
        "Any hosting provider which can serve static files can be used to serve "
        "documentation generated by MkDocs. Upload the contents of the entire site directory "
        "to wherever you are hosting your website from.",
    ),
    (
        "user-guide/writing-your-docs/",
        "file-layout",
        "Writing your docs",
        ["Writing your docs", "File layout"],
        "Your documentation source should be written as regular Markdown files, and placed in "
        "the documentation directory. By default, this directory will be named docs and will "
        "exist at the top level of your project, alongside the mkdocs.yml configuration file. "
        "The file index.md becomes the home page of the site.",
    ),
    (
        "user-guide/writing-your-docs/",
        "linking-to-images-and-media",
        "Writing your docs",
        ["Writing your docs", "Linking to images and media"],
        "As well as the Markdown source files, you can also include other file types in your "
        "documentation, which will be copied across when generating your documentation site. "
        "These might include images and other media. Place images in the docs directory and "
        "link to them with a relative path.",
    ),
    (
        "user-guide/customizing-your-theme/",
        "using-the-theme-custom_dir",
        "Customizing your theme",
        ["Customizing your theme", "Using the theme custom_dir"],
        "The theme.custom_dir configuration option can be used to point to a directory of "
        "files which override the files in a parent theme. Any file in the custom_dir with "
        "the same name as a file in the parent theme will replace that file.",
    ),
    (
        "user-guide/customizing-your-theme/",
        "using-the-extra_css",
        "Customizing your theme",
        ["Customizing your theme", "Using extra_css"],
        "To add custom CSS, create a CSS file in the docs directory and list it in the "
        "extra_css setting. Your stylesheet is then included in every page after the theme's "
        "own styles.",
    ),
    (
        "zh/",
        "安装",
        "快速开始",
        ["快速开始", "安装"],
        "使用 pip 安装 MkDocs。运行 pip install mkdocs 命令即可完成安装。"
        "安装完成后，可以使用 mkdocs new 命令创建新项目。",
    ),
    (
        "zh/",
        "开发服务器",
        "快速开始",
        ["快速开始", "开发服务器"],
        "MkDocs 自带开发服务器。运行 mkdocs serve 命令启动服务器。"
        "开发服务器默认监听 8000 端口，可以使用 --dev-addr 选项修改地址和端口。",
    ),
]

# (question, a phrase the chosen sentences must contain)
ANSWERABLE: list[tuple[str, str]] = [
    ("How do I install MkDocs?", "pip install mkdocs"),
    ("What port does the dev server listen on by default?", "8000"),
    ("How do I preview my documentation while I write it?", "dev-server"),
    ("How do I build a static site?", "mkdocs build"),
    ("What is the default value of dev_addr?", "127.0.0.1:8000"),
    ("How do I create a new project?", "mkdocs new"),
    ("What does use_directory_urls do?", "use_directory_urls is true"),
    ("Where should I put my Markdown source files?", "documentation source"),
    ("How do I deploy to GitHub Pages?", "gh-deploy"),
    ("How do I add custom CSS?", "extra_css"),
    ("What is site_url for?", "canonical URL"),
    ("How do I treat warnings as errors?", "treat warnings as errors"),
    ("Which search engine does the search plugin use?", "lunr.js"),
    ("How do I override theme templates?", "custom_dir"),
    ("How are pages ordered when there is no nav setting?", "alphanumerically"),
    ("What is the default docs_dir?", "docs"),
    ("Which hosting providers can serve the documentation?", "static files"),
    ("Which page becomes the home page?", "index.md"),
    ("如何安装 MkDocs？", "pip"),
    ("开发服务器默认使用哪个端口？", "8000"),
]

UNANSWERABLE: list[str] = [
    "How do I bake bread?",
    "What is the capital of France?",
    "How do I reset my database password?",
    "How do I deploy MkDocs to a Kubernetes cluster with Helm?",
    "Can I add Disqus comments to every page?",
    "How much does an enterprise license cost?",
    "How do I change the port of the PostgreSQL database?",
    "Does it support LaTeX math rendering with MathJax?",
    "How do I export the documentation to PDF?",
    "How do I enable dark mode on Windows 11?",
    "What is the boiling point of water?",
    "How can I send email notifications when a build fails?",
    "如何烤面包？",
    "How do I configure single sign-on with Okta?",
    "Who won the football world cup in 2014?",
]


def corpus_passages() -> list[Passage]:
    """The corpus as context passages (numbered 1..n in corpus order)."""
    return [
        _passage(n, page, anchor, title, path, text)
        for n, (page, anchor, title, path, text) in enumerate(CORPUS, start=1)
    ]


def retrieve(question: str, k: int = 8) -> list[Passage]:
    """A stand-in for retrieval: rank by shared tokens, renumber the top k 1..k."""
    q = set(tokenize(question))
    ranked = sorted(
        corpus_passages(),
        key=lambda p: -len(q & set(tokenize(" ".join([p.title, *p.heading_path, p.text])))),
    )
    return [
        _passage(i, p.page, p.anchor, p.title, p.heading_path, p.text)
        for i, p in enumerate(ranked[:k], start=1)
    ]


def _passage(n: int, page: str, anchor: str, title: str, path: list[str], text: str) -> Passage:
    return Passage(
        n=n,
        chunk_ids=[f"{page}#{anchor}~0"],
        section_id=f"{page}#{anchor}",
        page=page,
        anchor=anchor,
        title=title,
        heading_path=path,
        text=text,
        highlight=text,
    )


def _answer(
    question: str, *, max_sentences: int = 4, min_score: float = DEFAULT_MIN_SCORE
) -> ExtractiveResult:
    return answer_extractively(
        question, retrieve(question), max_sentences=max_sentences, min_score=min_score
    )


@pytest.mark.parametrize(("question", "phrase"), ANSWERABLE)
def test_answers_from_the_right_sentence(question: str, phrase: str) -> None:
    result = _answer(question)
    assert not result.abstained, (question, result.confidence)
    assert result.confidence >= DEFAULT_MIN_SCORE
    assert any(phrase.casefold() in s.text.casefold() for s in result.sentences), result
    assert 1 <= len(result.sentences) <= 4


@pytest.mark.parametrize("question", UNANSWERABLE)
def test_abstains_when_the_docs_do_not_cover_it(question: str) -> None:
    result = _answer(question)
    assert result.abstained, (question, result.confidence, result.sentences)
    assert result.sentences == []
    assert result.confidence < DEFAULT_MIN_SCORE
    assert "not seem to cover" in result.reason
    assert result.covered  # what the docs do cover, as passage numbers


def test_port_question_picks_the_sentence_with_the_port() -> None:
    result = _answer("What port does the dev server use?")
    texts = " ".join(s.text for s in result.sentences)
    assert "port 8000" in texts
    cited = {n for s in result.sentences for n in s.citations}
    passages = {p.n: p for p in retrieve("What port does the dev server use?")}
    assert all(len(s.citations) == 1 for s in result.sentences)
    assert any(passages[n].anchor in ("dev_addr", "the-dev-server") for n in cited)


def test_sentences_are_verbatim_and_cite_their_passage() -> None:
    passages = retrieve("How do I deploy to GitHub Pages?")
    by_n = {p.n: p for p in passages}
    result = answer_extractively("How do I deploy to GitHub Pages?", passages)
    for s in result.sentences:
        assert s.text in by_n[s.citations[0]].text


def test_output_puts_the_best_sentence_first() -> None:
    passages = [
        _passage(
            1, "a/", "x", "Server", ["Server"], "The server is fast. It listens on port 8000."
        ),
        _passage(2, "b/", "y", "Ports", ["Ports"], "Port 8000 is the default port of the server."),
    ]
    result = answer_extractively("What is the default port of the server?", passages)
    texts = [s.text for s in result.sentences]
    assert texts[0] == "Port 8000 is the default port of the server."


def test_a_command_comes_with_the_sentence_that_introduces_it() -> None:
    question = "How do I create a new project?"
    result = answer_extractively(question, retrieve(question))
    texts = [s.text for s in result.sentences]
    intro = "To create a new project, run the following command from the command line:"
    assert texts[:2] == [intro, "mkdocs new my-project"]


def test_max_sentences_is_respected() -> None:
    result = _answer("How do I install MkDocs and build and deploy the site?", max_sentences=2)
    assert 1 <= len(result.sentences) <= 2


def test_code_lines_only_when_the_question_asks_for_a_command() -> None:
    passages = [corpus_passages()[0]]  # installation: prose plus "pip install mkdocs"
    prose = answer_extractively("What does MkDocs require?", passages)
    assert prose.sentences and all("pip install" not in s.text for s in prose.sentences)
    command = answer_extractively("What command installs MkDocs?", passages)
    assert any(s.text == "pip install mkdocs" for s in command.sentences)


def test_headings_and_labels_are_not_answers() -> None:
    text = "Note\nThe default is 8000.\nDefault port"
    p = _passage(1, "a/", "x", "Server", ["Server", "Default port"], text)
    result = answer_extractively("What is the default port?", [p])
    assert [s.text for s in result.sentences] == ["The default is 8000."]


def test_pronoun_sentence_brings_its_antecedent() -> None:
    text = (
        "The dev_addr setting sets the address of the dev server. "
        "It defaults to 127.0.0.1:8000 for the address."
    )
    p = _passage(1, "a/", "dev_addr", "Configuration", ["Configuration", "dev_addr"], text)
    result = answer_extractively("What does it default to?", [p], min_score=0.0)
    texts = [s.text for s in result.sentences]
    assert texts[-1].startswith("It defaults")
    assert texts[0].startswith("The dev_addr setting")


def test_chinese_question_and_passages() -> None:
    result = _answer("如何修改开发服务器的端口？")
    assert not result.abstained
    assert any("--dev-addr" in s.text for s in result.sentences)
    assert all(s.text.endswith("。") for s in result.sentences)


def test_excluded_passages_are_not_quoted() -> None:
    passages = [
        _passage(1, "a/", "x", "Server", ["Server"], "The dev server listens on port 8000."),
        _passage(2, "b/", "y", "Server", ["Server"], "The dev server listens on port 9000."),
    ]
    passages[0] = Passage(**{**passages[0].__dict__, "excluded": True})
    result = answer_extractively("Which port does the dev server listen on?", passages)
    assert [s.citations for s in result.sentences] == [[2]]


def test_no_passages_abstains() -> None:
    result = answer_extractively("How do I install MkDocs?", [])
    assert result.abstained and result.confidence == 0.0 and result.covered == []


def test_covered_lists_distinct_sections_best_first() -> None:
    passages = retrieve("How do I bake bread?")
    result = answer_extractively("How do I bake bread?", passages)
    assert result.covered == [p.n for p in passages[:5]]


def test_confidence_separates_answerable_from_unanswerable() -> None:
    answerable = [_answer(q, min_score=0.0).confidence for q, _ in ANSWERABLE]
    unanswerable = [_answer(q, min_score=0.0).confidence for q in UNANSWERABLE]
    assert min(answerable) > max(unanswerable)
    assert all(0.0 <= c <= 1.0 for c in answerable + unanswerable)


def test_choose_threshold() -> None:
    pairs = [(0.9, True), (0.6, True), (0.3, False), (0.2, False), (0.1, False)]
    assert choose_threshold(pairs, max_false_answer_rate=0.0) == pytest.approx(0.3001)
    # One of three unanswerable questions may be answered: refuse from 0.2 up.
    assert choose_threshold(pairs, max_false_answer_rate=0.34) == pytest.approx(0.2001)
    assert choose_threshold([(0.5, True)]) == 0.0


# -- answer types, tables and sentence embeddings ------------------------------

INSTALL = (
    "Anchored is one Python distribution, mkdocs-anchored, with extras for each side:\n"
    "extra | installs | for\n"
    "build | the MkDocs plugin, the HTML chunker, publishing to S3 | mkdocs build in CI\n"
    "lambda | the query function (Starlette app, Mangum handler, LLM clients) | AWS Lambda\n"
    "serve | both, plus uvicorn and Material | anchored serve on your machine\n"
    'pip install "mkdocs-anchored[serve]"\n'
    "Python 3.11 or newer. The embedding model ships inside the package: nothing is "
    "downloaded from a model hub, ever."
)
WIDGET = (
    "option | default | meaning\n"
    "widget | true | Add the ask box to every page.\n"
    'widget_endpoint | "" | Base URL of the query function. Empty means the same origin '
    "as the site (what anchored serve does).\n"
    "widget_title | Ask the docs | Dialog title.\n"
    "widget_placeholder | Ask a question about these docs… | Placeholder of the question box.\n"
    "option | default | meaning\n"
    "widget_shortcut | a | Key that opens the dialog (ignored while typing in a field).\n"
    "Nothing secret ever goes into the page: LLM keys live only in the query function's "
    "environment (settings)."
)
MODELS = (
    "name | languages | dimensions | notes\n"
    "all-MiniLM-L6-v2 (default) | English | 384 | int8 ONNX, 23 MB, shipped inside the package\n"
    "multilingual-e5-small | 100 languages incl. Chinese | 384 | see How it works\n"
    "The model file travels inside the index, so the query function always embeds questions "
    "with exactly the model that embedded the pages."
)
ANSWERS = (
    "Then every sentence is checked: citations to passages that were not in the context "
    "are dropped; a sentence with no valid citation, or whose numbers, option names, code "
    "identifiers or quoted strings do not occur in the passages it cites, is removed (the "
    "response says how many). If nothing supported is left, the answer abstains and lists "
    "the sections that come closest."
)


def anchored_passages() -> list[Passage]:
    return [
        _passage(
            1,
            "getting-started/",
            "install",
            "Getting started",
            ["Getting started", "Install"],
            INSTALL,
        ),
        _passage(
            2,
            "configuration/",
            "ask-box-options",
            "Configuration",
            ["Configuration", "Ask box options"],
            WIDGET,
        ),
        _passage(
            3, "configuration/", "models", "Configuration", ["Configuration", "Models"], MODELS
        ),
        _passage(
            4, "how-it-works/", "answers", "How it works", ["How it works", "Answers"], ANSWERS
        ),
    ]


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder(get_model(), threads=2)


def _ask(question: str, passages: list[Passage], embedder: Embedder | None) -> ExtractiveResult:
    return answer_extractively(
        question,
        passages,
        embedder=embedder,
        model=DEFAULT_MODEL if embedder is not None else "",
    )


def test_a_version_question_prefers_the_sentence_with_the_version() -> None:
    result = _ask("Which Python version does Anchored need?", anchored_passages(), None)
    texts = [s.text for s in result.sentences]
    assert not result.abstained
    assert texts[0].startswith("Python 3.11 or newer.")
    assert "extra | installs | for" not in texts


def test_a_table_header_row_is_never_quoted_or_pulled_in() -> None:
    passages = [anchored_passages()[0]]
    question = "Which extras does the Python distribution of Anchored have for each side?"
    result = answer_extractively(question, passages, min_score=0.0)
    texts = [s.text for s in result.sentences]
    assert texts and texts[0].startswith("Anchored is one Python distribution")
    assert all(not t.startswith(("extra | installs", "option | default")) for t in texts)
    for question in ("What does the option column mean?", "Which default meaning options exist?"):
        result = answer_extractively(question, [anchored_passages()[1]], min_score=0.0)
        assert all(s.text != "option | default | meaning" for s in result.sentences)


def test_a_table_row_is_quoted_as_the_page_shows_it_and_passes_verification() -> None:
    passages = anchored_passages()
    result = _ask("What is the default value of widget_shortcut?", passages, None)
    assert result.sentences[0].text == (
        "widget_shortcut | a | Key that opens the dialog (ignored while typing in a field)."
    )
    by_n = {p.n: p for p in passages}
    assert verify(result.sentences, by_n).removed == 0
    assert all(s.text in by_n[s.citations[0]].text for s in result.sentences)


def test_a_how_do_i_change_question_prefers_the_row_naming_the_option() -> None:
    result = answer_extractively(
        "How do I change the title of the dialog?", anchored_passages(), min_score=0.0
    )
    assert result.sentences[0].text.startswith("widget_title | Ask the docs")


def test_a_what_is_question_prefers_the_defining_sentence() -> None:
    passages = [
        _passage(
            1, "a/", "x", "Skylark", ["Skylark"], "Skylark reads its settings from skylark.yml."
        ),
        _passage(
            2, "b/", "y", "Skylark", ["Skylark"], "Skylark is a static site server for teams."
        ),
    ]
    result = answer_extractively("What is Skylark?", passages, min_score=0.0)
    assert result.sentences[0].text == "Skylark is a static site server for teams."


def test_semantic_similarity_rescues_a_paraphrased_question(embedder: Embedder) -> None:
    question = "How do I change the keyboard shortcut of the ask box?"
    lexical = _ask(question, anchored_passages(), None)
    assert lexical.abstained or "widget_shortcut" not in lexical.sentences[0].text
    result = _ask(question, anchored_passages(), embedder)
    assert not result.abstained, result.confidence
    assert result.sentences[0].text.startswith("widget_shortcut | a |")
    assert result.embedded > 0


def test_semantic_similarity_finds_the_rule_for_uncited_sentences(embedder: Embedder) -> None:
    result = _ask("How are sentences without citations handled?", anchored_passages(), embedder)
    assert not result.abstained, result.confidence
    assert "no valid citation" in result.sentences[0].text


@pytest.mark.parametrize(
    "question",
    [
        "How do I bake sourdough bread?",
        "Who won the football world cup in 2018?",
        "What is the capital of Australia?",
        "How do I reset my Windows password?",
    ],
)
def test_abstains_on_unrelated_questions_with_the_embedder(
    question: str, embedder: Embedder
) -> None:
    result = _ask(question, anchored_passages(), embedder)
    assert result.abstained, (question, result.confidence, result.sentences)
    assert result.confidence < BLENDED_MIN_SCORE
    assert result.covered


@pytest.mark.parametrize(("question", "phrase"), ANSWERABLE)
def test_answers_from_the_right_sentence_with_the_embedder(
    question: str, phrase: str, embedder: Embedder
) -> None:
    result = _ask(question, retrieve(question), embedder)
    assert not result.abstained, (question, result.confidence)
    assert any(phrase.casefold() in s.text.casefold() for s in result.sentences), result


@pytest.mark.parametrize("question", UNANSWERABLE)
def test_abstains_when_the_docs_do_not_cover_it_with_the_embedder(
    question: str, embedder: Embedder
) -> None:
    result = _ask(question, retrieve(question), embedder)
    assert result.abstained, (question, result.confidence, result.sentences)


def test_an_uncalibrated_model_orders_by_similarity_but_confidence_stays_lexical(
    embedder: Embedder,
) -> None:
    question = "What is the default port of the dev server?"
    plain = answer_extractively(question, retrieve(question))
    other = answer_extractively(question, retrieve(question), embedder=embedder, model="custom")
    assert other.confidence == plain.confidence
    assert not other.abstained and other.embedded > 0


def test_the_embedding_budget_bounds_the_sentences_compared(embedder: Embedder) -> None:
    text = " ".join(
        f"Setting number {i} changes the behaviour of part {i} of the build." for i in range(80)
    )
    passages = [_passage(1, "a/", "x", "Settings", ["Settings"], text)]
    result = answer_extractively(
        "Which setting changes part 7 of the build?",
        passages,
        embedder=embedder,
        model=DEFAULT_MODEL,
    )
    assert 0 < result.embedded <= MAX_EMBEDDED


def test_a_short_command_is_an_answer_to_how_do_i_install() -> None:
    passages = [
        _passage(
            1, "a/", "homebrew", "Install", ["Install", "Homebrew (macOS)"], "brew install cfn-lint"
        ),
        _passage(
            2, "a/", "pip", "Install", ["Install", "Pip"], "Python 3.10 to 3.14 are supported."
        ),
    ]
    result = answer_extractively("How do I install cfn-lint with Homebrew?", passages)
    assert [s.text for s in result.sentences][:1] == ["brew install cfn-lint"]
    # A short fragment that is no command stays a label, not an answer.
    label = [_passage(1, "a/", "x", "Server", ["Server"], "Default port\nThe port is 8000.")]
    result = answer_extractively("What is the default port?", label)
    assert "Default port" not in [s.text for s in result.sentences]
