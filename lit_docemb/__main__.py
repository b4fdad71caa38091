from lit_docemb.commands.cli import main

if __name__ == "__main__":
    main()
