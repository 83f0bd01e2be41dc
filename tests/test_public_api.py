import toolwire


def test_all_names_exist_and_are_sorted() -> None:
    for name in toolwire.__all__:
        assert hasattr(toolwire, name), name
    assert list(toolwire.__all__) == sorted(toolwire.__all__)
    assert len(set(toolwire.__all__)) == len(toolwire.__all__)


def test_ships_py_typed() -> None:
    from importlib.resources import files

    assert files("toolwire").joinpath("py.typed").is_file()
